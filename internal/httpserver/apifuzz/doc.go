// Package apifuzz holds the fuzz targets of the HTTP API (its tests
// only): arbitrary requests to every route family never get a 500.
package apifuzz
