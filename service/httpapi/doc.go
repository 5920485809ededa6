// Package httpapi is the coordinator's HTTP server of the protocol (package
// wire): NewHandler serves any Backend (package service is the
// coordinator; the Worker routes to a Durable Object), and CORS lets
// browser pages call it.
package httpapi
