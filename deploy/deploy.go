// Package deploy holds the deployment files: the nginx config (nginx/flashsale.conf), the
// compose file (compose.yaml) with its NATS and Redis configs, and the example settings. It
// embeds the nginx config so that testenv runs the very file a deployment uses (DEPLOYMENT.md).
package deploy

import _ "embed"

// NginxConf is nginx/flashsale.conf: an http-level nginx config in front of the instances
// flashsale1..3 of compose.yaml. testenv.RenderNginx points it at other addresses.
//
//go:embed nginx/flashsale.conf
var NginxConf string
