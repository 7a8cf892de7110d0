// Command services serves the small in-memory HTTP services the Starflow
// examples call: inventory and payments (examples/order-saga.yaml), a
// flaky data feed, a user directory and a warehouse loader
// (examples/data-pipeline.yaml), and a CI system
// (examples/ci-pipeline.yaml). Start it in one terminal:
//
//	go run ./examples/services
//
// and run the examples from another (see examples/README.md). Every
// example takes the services' address from its input's base_url
// (default http://127.0.0.1:8089). State lives in memory and is lost when
// the process stops; one log line per request goes to stderr, so you can
// watch retries arrive and Idempotency-Key replays being answered.
//
// The handlers live in package demo (examples/services/demo) so that
// tests can serve them in-process with httptest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/starflow/starflow/examples/services/demo"
)

const usage = `usage: go run ./examples/services [flags]

Serves the demo services the Starflow examples call (JSON in, JSON out,
in-memory state, one log line per request on stderr):

  POST /inventory/reserve  {sku, qty}            reserve stock → {reservation_id, ...}
  POST /inventory/release  {reservation_id}      give it back (saga compensation)
  POST /inventory/commit   {reservation_id, charge_id}
  POST /payments/charge    {amount, currency, reservation_id}
                           needs "Authorization: Bearer <token>"; answers 402
                           (declined) when amount > -payment-limit
  GET  /data/flaky?fail=N&records=M
                           503 for the first N calls per Idempotency-Key
                           (default 2), then 200 with M records
  GET  /data/users?ids=1,2,3
  POST /data/load          {table, mode, batch_size, rows}
  POST /ci/build | /ci/test | /ci/deploy
                           take up to -ci-delay; /ci/test fails when the body
                           has "fail": true

Every POST honours Idempotency-Key: a repeated key gets the first answer
again and changes nothing. Starflow sends one with every service_call.

Then, in another terminal:

  PAYMENT_TOKEN=demo-token go run ./cmd/starflow run examples/order-saga.yaml \
      --input '{"sku": "widget", "qty": 2, "unit_price": 19.99}'
  go run ./cmd/starflow run examples/data-pipeline.yaml
  go run ./cmd/starflow run examples/ci-pipeline.yaml --input '{"branch": "main"}'

Flags:
`

func main() {
	fs := flag.NewFlagSet("services", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	addr := fs.String("addr", "127.0.0.1:8089", "address to listen on")
	limit := fs.Float64("payment-limit", 1000, "charges above this amount are declined with 402")
	stock := fs.Int("stock", 100, "units every SKU starts with")
	token := fs.String("payment-token", "", "the only bearer token /payments accepts (default: any non-empty token)")
	failures := fs.Int("flaky-failures", 2, "503s per Idempotency-Key from /data/flaky when the request does not say (?fail=N)")
	ciDelay := fs.Duration("ci-delay", 300*time.Millisecond, "longest time a CI endpoint takes")
	quiet := fs.Bool("quiet", false, "do not log requests")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "services: unexpected argument %q\n\n", fs.Arg(0))
		fs.Usage()
		os.Exit(2)
	}

	logger := log.New(os.Stderr, "services: ", log.Ltime|log.Lmicroseconds)
	cfg := demo.Config{PaymentLimit: *limit, Stock: *stock, PaymentToken: *token, FlakyFailures: *failures, CIDelay: *ciDelay, Log: logger}
	if *quiet {
		cfg.Log = nil
	}
	if *ciDelay == 0 {
		cfg.CIDelay = -1
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		logger.Fatalf("cannot listen on %s: %v (is another copy already running? use -addr)", *addr, err)
	}
	srv := &http.Server{Handler: demo.New(cfg), ReadHeaderTimeout: 10 * time.Second}
	logger.Printf("listening on http://%s (payment limit %.2f, %d units per SKU); Ctrl-C stops", ln.Addr(), *limit, *stock)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Fatal(err)
	}
	logger.Print("stopped")
}
