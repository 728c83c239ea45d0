package shop

// Notices carry short best-effort messages between the instances of a deployment (store.Notices,
// on NATS core subjects): an item sold out or available again, a sale changed. A notice may be
// lost; every use bounds that with a TTL of its own.
type Notices interface {
	Publish(subject string, data []byte) error
	// Subscribe calls handle with each notice on subject (a trailing * matches one token) until
	// stop is called.
	Subscribe(subject string, handle func(subject string, data []byte)) (stop func(), err error)
}

// NoNotices is a deployment of one instance: nothing is sent and nothing arrives.
type NoNotices struct{}

// Publish sends nothing.
func (NoNotices) Publish(string, []byte) error { return nil }

// Subscribe hears nothing.
func (NoNotices) Subscribe(string, func(string, []byte)) (func(), error) { return func() {}, nil }
