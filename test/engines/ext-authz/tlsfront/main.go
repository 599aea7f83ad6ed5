// Command tls-front puts TLS in front of a plaintext gRPC server: Istio's sample ext_authz server
// has no TLS listener, so dojang's ext_authz over TLS reaches the real server through this. It
// terminates TLS with Go's crypto/tls (ALPN "h2"; with -client-ca, only a client certificate that
// CA signed is accepted) and relays the bytes unchanged to -backend, one backend connection per
// client connection. It prints "tls-front listening on <host:port>" once it accepts. Test-only.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"sync"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "where to accept TLS connections")
	backend := flag.String("backend", "", "the plaintext server, host:port")
	certFile := flag.String("cert", "", "the server certificate (PEM)")
	keyFile := flag.String("key", "", "its private key (PEM)")
	clientCA := flag.String("client-ca", "", "require a client certificate signed by this CA (PEM); none when empty")
	flag.Parse()
	if *backend == "" || *certFile == "" || *keyFile == "" {
		log.Fatal("tls-front: -backend, -cert and -key are required")
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		log.Fatalf("tls-front: %v", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
	if *clientCA != "" {
		pem, err := os.ReadFile(*clientCA)
		if err != nil {
			log.Fatalf("tls-front: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			log.Fatalf("tls-front: no certificate in %s", *clientCA)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	ln, err := tls.Listen("tcp", *listen, cfg)
	if err != nil {
		log.Fatalf("tls-front: %v", err)
	}
	fmt.Printf("tls-front listening on %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatalf("tls-front: %v", err)
		}
		go relay(c.(*tls.Conn), *backend)
	}
}

// relay completes the handshake (within 10 s), then copies both ways until either side ends.
func relay(c *tls.Conn, backend string) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		log.Printf("tls-front: handshake with %s: %v", c.RemoteAddr(), err)
		return
	}
	_ = c.SetDeadline(time.Time{})
	b, err := net.Dial("tcp", backend)
	if err != nil {
		log.Printf("tls-front: backend %s: %v", backend, err)
		return
	}
	defer b.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(b, c)
		_ = b.(*net.TCPConn).CloseWrite()
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(c, b)
		_ = c.CloseWrite()
	}()
	wg.Wait()
}
