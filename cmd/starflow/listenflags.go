package main

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow/internal/httpserver"
)

// envAllowedHosts lists, comma-separated, the extra names the listener's
// Host check accepts (--allowed-host).
const envAllowedHosts = "STARFLOW_ALLOWED_HOSTS"

// listenFlags are the HTTP listener's hardening flags: the Host check's
// extra names and the wake rate limit. Timeouts and the header limit are
// httpserver's documented defaults.
type listenFlags struct {
	allowedHosts   []string
	wakeRate       float64
	wakeBurst      int
	clientIPHeader string
}

func (l *listenFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&l.allowedHosts, "allowed-host", nil, fmt.Sprintf("a name, besides 127.0.0.1, localhost, [::1] and the host of --wake-url, that the Host header of a request may carry (a reverse proxy's public name); repeatable; others are refused 403 (env %s, comma-separated)", envAllowedHosts))
	cmd.Flags().Float64Var(&l.wakeRate, "wake-rate", httpserver.WakeRateDefault, "POST /wake/{token} requests per second one client (IP address) may send; past it 429 with Retry-After; 0 turns the limit off")
	cmd.Flags().IntVar(&l.wakeBurst, "wake-burst", httpserver.WakeBurstDefault, "wake requests one client may send at once before --wake-rate applies")
	cmd.Flags().StringVar(&l.clientIPHeader, "client-ip-header", "", "header in which a reverse proxy on loopback passes the client's address (X-Forwarded-For: its last address; X-Real-IP), so the wake rate limit is per client rather than per proxy (default: the connection's address)")
}

// resolve applies the environment and checks the values.
func (l *listenFlags) resolve(cmd *cobra.Command) error {
	if !cmd.Flags().Changed("allowed-host") {
		for _, h := range strings.Split(os.Getenv(envAllowedHosts), ",") {
			if h = strings.TrimSpace(h); h != "" {
				l.allowedHosts = append(l.allowedHosts, h)
			}
		}
	}
	if err := (httpserver.ServerConfig{AllowedHosts: l.allowedHosts}).Validate(); err != nil {
		return fmt.Errorf("--allowed-host (or %s): %w", envAllowedHosts, err)
	}
	// --wake-rate and --wake-burst: checkFlagRanges.
	if h := l.clientIPHeader; h != "" && strings.ContainsAny(h, " :\t\r\n") {
		return fmt.Errorf("--client-ip-header %q: want a header name such as X-Forwarded-For", h)
	}
	return nil
}

// serverConfig is the listener's configuration: the Host check accepts
// the --allowed-host names and the host of wakeURL (the public URL a
// reverse proxy serves).
func (l *listenFlags) serverConfig(wakeURL string) httpserver.ServerConfig {
	hosts := append([]string(nil), l.allowedHosts...)
	if wakeURL != "" {
		if u, err := url.Parse(strings.ReplaceAll(wakeURL, "{token}", "TOKEN")); err == nil && u.Hostname() != "" {
			hosts = append(hosts, u.Hostname())
		}
	}
	return httpserver.ServerConfig{AllowedHosts: hosts}
}

// handlerConfig sets the wake rate limit of the handler's configuration.
func (l *listenFlags) handlerConfig(cfg httpserver.Config) httpserver.Config {
	cfg.WakeRate, cfg.WakeBurst, cfg.ClientIPHeader = l.wakeRate, l.wakeBurst, l.clientIPHeader
	if l.wakeRate == 0 {
		cfg.WakeRate = -1 // off
	}
	return cfg
}
