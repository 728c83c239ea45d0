package web

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// OpenAPI is the OpenAPI 3.0.3 document of the public contract (web/openapi.yaml): every route
// of NewRouter with its requests, responses, headers and error codes. It is served at
// GET /api/openapi.yaml, and openapi_test.go checks it against the router in both directions.
//
//go:embed openapi.yaml
var OpenAPI []byte

// serveOpenAPI handles the "GET /api/openapi.yaml" route.
func serveOpenAPI(c *gin.Context) {
	c.Header("Cache-Control", "public, max-age=300")
	c.Data(http.StatusOK, "application/yaml", OpenAPI)
}
