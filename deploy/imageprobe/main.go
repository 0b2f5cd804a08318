package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// timeout bounds one probe; the container's health check interval is
// longer.
const timeout = 5 * time.Second

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kplane-probe http://host:port/path | nats://host:port")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := probe(ctx, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "kplane-probe:", err)
		os.Exit(1)
	}
}

func probe(ctx context.Context, target string) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "http":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	case "nats":
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return err
		}
		defer conn.Close()
		if d, ok := ctx.Deadline(); ok {
			_ = conn.SetDeadline(d)
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil {
			return fmt.Errorf("read the server's greeting: %w", err)
		}
		if !strings.HasPrefix(line, "INFO ") {
			return fmt.Errorf("the server greeted with %q, not INFO", strings.TrimSpace(line))
		}
		return nil
	default:
		return errors.New("want an http:// or nats:// URL")
	}
}
