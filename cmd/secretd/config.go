package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"time"
)

// Config is secretd's own configuration (the common flags and roles come
// from lib/daemon).
type Config struct {
	CredentialsDir string        // -credentials-directory: systemd's $CREDENTIALS_DIRECTORY; "" = none
	MaxLeases      int           // -max-leases: staged leases at most
	SweepInterval  time.Duration // -sweep-interval: how often expired leases are zeroed
	SocketGroup    string        // -socket-group: group (name or gid) for the 0750/0660 multi-user socket; "" = same-user
	socketGID      int           // resolved SocketGroup, -1 for none
}

func (c *Config) register(fs *flag.FlagSet) {
	fs.StringVar(&c.CredentialsDir, "credentials-directory", os.Getenv("CREDENTIALS_DIRECTORY"), "read-only systemd credentials directory to import (default $CREDENTIALS_DIRECTORY); see docs/secretd.md")
	fs.IntVar(&c.MaxLeases, "max-leases", 10000, "most leases staged at once")
	fs.DurationVar(&c.SweepInterval, "sweep-interval", time.Second, "how often expired leases are zeroed and removed")
	fs.StringVar(&c.SocketGroup, "socket-group", "", "group (name or gid) that may reach the socket (directory 0750, socket 0660); empty: same-user 0700/0600")
}

func (c *Config) validate() error {
	if c.MaxLeases < 1 {
		return errors.New("-max-leases must be at least 1")
	}
	if c.SweepInterval < 10*time.Millisecond || c.SweepInterval > time.Minute {
		return errors.New("-sweep-interval must be 10ms..1m")
	}
	c.socketGID = -1
	if c.SocketGroup == "" {
		return nil
	}
	if id, err := strconv.ParseUint(c.SocketGroup, 10, 31); err == nil {
		c.socketGID = int(id)
		return nil
	}
	g, err := user.LookupGroup(c.SocketGroup)
	if err != nil {
		return fmt.Errorf("-socket-group: %w", err)
	}
	id, err := strconv.Atoi(g.Gid)
	if err != nil {
		return fmt.Errorf("-socket-group: group %q has gid %q", c.SocketGroup, g.Gid)
	}
	c.socketGID = id
	return nil
}
