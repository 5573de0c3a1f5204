// Package sftpserver is a small in-process SSH server serving SFTP from a
// local directory tree, on 127.0.0.1. ediwatch's demo serves its drop with
// it, and tests use it for scripted faults (Drop cuts every connection).
// It accepts one client key, generated with the server's host key.
package sftpserver

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// Server is a running server.
type Server struct {
	// Addr is host:port.
	Addr string
	// KnownHosts is a known_hosts file holding the server's host key.
	KnownHosts string
	// KeyFile is the client's private key (OpenSSH format).
	KeyFile string

	ln    net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Start listens on 127.0.0.1 and writes the client key and known_hosts
// into dir.
func Start(dir string) (*Server, error) {
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		return nil, err
	}
	userPub, userPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(userPriv, "ediwatch client")
	if err != nil {
		return nil, err
	}
	s := &Server{KeyFile: filepath.Join(dir, "client_ed25519"), KnownHosts: filepath.Join(dir, "known_hosts"),
		conns: map[net.Conn]struct{}{}}
	if err := os.WriteFile(s.KeyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	authorized, err := ssh.NewPublicKey(userPub)
	if err != nil {
		return nil, err
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) == string(authorized.Marshal()) {
			return nil, nil
		}
		return nil, errors.New("unknown key")
	}}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.ln, s.Addr = ln, ln.Addr().String()
	host, port, _ := net.SplitHostPort(s.Addr)
	line := fmt.Sprintf("[%s]:%s %s", host, port, ssh.MarshalAuthorizedKey(hostSigner.PublicKey()))
	if err := os.WriteFile(s.KnownHosts, []byte(line), 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	s.wg.Add(1)
	go s.accept(cfg)
	return s, nil
}

func (s *Server) accept(cfg *ssh.ServerConfig) {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[nc] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(nc, cfg)
			s.mu.Lock()
			delete(s.conns, nc)
			s.mu.Unlock()
		}()
	}
}

func (s *Server) serve(nc net.Conn, cfg *ssh.ServerConfig) {
	defer nc.Close()
	_, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	defer wg.Wait()
	for nch := range chans {
		if nch.ChannelType() != "session" {
			nch.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, requests, err := nch.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ch.Close()
			for req := range requests {
				ok := req.Type == "subsystem" && len(req.Payload) > 4 && string(req.Payload[4:]) == "sftp"
				req.Reply(ok, nil)
				if !ok {
					continue
				}
				if srv, err := sftp.NewServer(ch); err == nil {
					srv.Serve()
					srv.Close()
				}
				return
			}
		}()
	}
}

// Drop closes every open connection, as a flaky network would.
func (s *Server) Drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// Close stops the server and waits for its goroutines.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.Drop()
	s.wg.Wait()
	return err
}
