package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// DefaultLockPath is the leader lock's variable unless LeaderOptions.Path
// says otherwise.
const DefaultLockPath = "rondo/allocator-leader"

// ErrLeadershipLost is returned by RunAsLeader when the lock could not be
// renewed; fn's context was cancelled. The caller may call RunAsLeader again.
var ErrLeadershipLost = errors.New("state: leader lock lost")

// LeaderOptions configures RunAsLeader.
type LeaderOptions struct {
	Namespace string        // default "default"
	Path      string        // default DefaultLockPath
	TTL       time.Duration // lock TTL; Nomad accepts 10s to 24h; default 15s
	// RetryInterval is how often a follower tries to take the lock; default TTL/2.
	RetryInterval time.Duration
	// OnWait, if set, is called each time the lock is found held by another.
	OnWait func()
	// OnRetry, if set, is called when Nomad could not be asked (unreachable,
	// restarting, no leader): the call is retried, not given up.
	OnRetry func(err error)
	// Lease, if set, keeps the lease's ID on this host (OpenLeaseFile): a
	// restarted agent renews the lease its dead predecessor held instead
	// of waiting for it to expire. OnResume, if set, is told when it did.
	Lease    *LeaseFile
	OnResume func()
}

// Transient reports whether a Nomad API error may pass by itself: the
// request got no answer (connection refused or reset, a timeout: a server
// restarting) or a 5xx / 429 answer (no cluster leader yet). A 4xx answer
// (permission denied, a bad request), a lock conflict and anything that is
// not about reaching Nomad (a state that does not decode) will not.
func Transient(err error) bool {
	if err == nil || errors.Is(err, api.ErrLockConflict) || errors.Is(err, context.Canceled) {
		return false
	}
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) && ue.HasStatusCode() {
		code := ue.StatusCode()
		return code >= 500 || code == 429
	}
	// Transport failures: *url.Error, *net.OpError and syscall.Errno
	// (connection refused or reset) are all net.Errors.
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	// Some paths of the API client flatten the transport error to text.
	msg := err.Error()
	for _, s := range []string{"connection refused", "connection reset", "no cluster leader", "i/o timeout", ": EOF"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// RunAsLeader blocks until it holds the Nomad variable lock at o.Path, then
// runs fn with a context that is cancelled as soon as a renewal fails, and
// renews the lock every TTL/3 while fn runs. It releases the lock when fn
// returns and returns fn's error, ErrLeadershipLost, or ctx's error.
//
// It is a small loop over api.Locks rather than api.LockLeaser because the
// leaser keeps running the protected function when a renewal fails with a
// lock conflict (someone else took the lock): two allocators would run at
// once. Here losing the lock always cancels fn. A deposed leader can still be
// mid-write when cancelled; the state's check-and-set (Store.Save) rejects
// that write, so the lock is for liveness and the CAS for safety.
//
// c.Locks (nomad/api) rewrites c's retry settings without a lock, so two
// RunAsLeader calls must not share one *api.Client (the race detector
// catches it); one allocator process runs one.
func RunAsLeader(ctx context.Context, c *api.Client, o LeaderOptions, fn func(ctx context.Context) error) error {
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.Path == "" {
		o.Path = DefaultLockPath
	}
	if o.TTL == 0 {
		o.TTL = api.DefaultLockTTL
	}
	if o.RetryInterval == 0 {
		o.RetryInterval = o.TTL / 2
	}
	wo := api.WriteOptions{Namespace: o.Namespace}
	id := ""
	if o.Lease != nil {
		id = resumeLease(ctx, c, wo, o)
	}
	for id == "" {
		got, err := acquireLock(c, wo, o)
		if err == nil {
			id = got
			break
		}
		switch {
		case errors.Is(err, api.ErrLockConflict):
			if o.OnWait != nil {
				o.OnWait()
			}
		case Transient(err) && ctx.Err() == nil:
			if o.OnRetry != nil {
				o.OnRetry(err)
			}
		default:
			return fmt.Errorf("state: acquire leader lock %s: %w", o.Path, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.RetryInterval):
		}
	}
	if o.Lease != nil {
		if err := o.Lease.save(o.Namespace, o.Path, id); err != nil && o.OnRetry != nil {
			// Not fatal: a restart then waits for the lease to expire.
			o.OnRetry(fmt.Errorf("state: lease_file %s: %w", o.Lease.Path(), err))
		}
	}
	// The handle renews and releases the lease by its ID.
	locks, err := c.Locks(wo, api.Variable{Namespace: o.Namespace, Path: o.Path,
		Lock: &api.VariableLock{ID: id, TTL: o.TTL.String()}}, api.LocksOptionWithMaxRetries(3))
	if err != nil {
		return fmt.Errorf("state: leader lock: %w", err)
	}
	defer func() {
		// Release with a context of its own: ctx may be the reason we stop.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = locks.Release(rctx) // after a lost lease this conflicts; nothing to do
		if o.Lease != nil {
			_ = o.Lease.clear()
		}
	}()

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(fctx) }()
	tick := time.NewTicker(o.TTL / 3)
	defer tick.Stop()
	lastOK := time.Now()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			rctx, rcancel := context.WithTimeout(ctx, o.TTL/3)
			err := locks.Renew(rctx)
			rcancel()
			if err == nil {
				lastOK = time.Now()
				continue
			}
			// Only a conflict (the lease expired; someone else may hold
			// it) ends the lease for sure. While Nomad is unreachable
			// (Transient) nobody can take the lock and a server that
			// restarts restores it with its TTL restarted, so renewing
			// goes on: giving up would leave our own old lease to expire
			// (TTL plus Nomad's lock delay, ~35 s measured) before the lock
			// could be taken again. Any other error (a 403 from a server
			// still loading its ACLs) is retried while within the TTL.
			// Safety does not rest on this: a deposed agent's next save is
			// refused by the state's check-and-set before it enforces
			// anything.
			if !errors.Is(err, api.ErrLockConflict) && (Transient(err) || time.Since(lastOK)+o.TTL/3 < o.TTL) {
				if o.OnRetry != nil {
					o.OnRetry(err)
				}
				continue
			}
			cancel()
			<-done
			return fmt.Errorf("%w: %v", ErrLeadershipLost, err)
		}
	}
}

// Lock returns a bare lock handle (Acquire, Renew, Release) on o's path, for
// callers that want their own loop.
func Lock(c *api.Client, o LeaderOptions) (*api.Locks, error) {
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.Path == "" {
		o.Path = DefaultLockPath
	}
	if o.TTL == 0 {
		o.TTL = api.DefaultLockTTL
	}
	return c.Locks(api.WriteOptions{Namespace: o.Namespace},
		api.Variable{Namespace: o.Namespace, Path: o.Path, Lock: &api.VariableLock{TTL: o.TTL.String()}})
}

// LeaderInfo is what the leader publishes about itself next to the lock,
// in the variable InfoPath(lock path): its status API's address, for
// standbys to name. It is additive: the lock variable is unchanged.
type LeaderInfo struct {
	StatusAddr string    `json:"status_addr"`
	Since      time.Time `json:"since"`
	// LeaseAddr is the leader's lease API URL (item lease_addr, absent
	// when it serves none): standbys forward lease calls there.
	LeaseAddr string `json:"lease_addr,omitempty"`
}

// InfoPath is the variable holding the leader's LeaderInfo for the lock at
// lockPath (default DefaultLockPath): lockPath + "-info".
func InfoPath(lockPath string) string {
	if lockPath == "" {
		lockPath = DefaultLockPath
	}
	return lockPath + "-info"
}

// PublishLeader writes info to InfoPath(o.Path), replacing the last
// leader's.
func PublishLeader(ctx context.Context, c *api.Client, o LeaderOptions, info LeaderInfo) error {
	ns := o.Namespace
	if ns == "" {
		ns = "default"
	}
	v := &api.Variable{Namespace: ns, Path: InfoPath(o.Path), Items: api.VariableItems{
		"status_addr": info.StatusAddr, "since": info.Since.UTC().Format(time.RFC3339Nano)}}
	if info.LeaseAddr != "" {
		v.Items["lease_addr"] = info.LeaseAddr
	}
	_, _, err := c.Variables().Create(v, (&api.WriteOptions{Namespace: ns}).WithContext(ctx))
	return err
}

// ReadLeader reads the leader's LeaderInfo (ok false when none was
// published).
func ReadLeader(ctx context.Context, c *api.Client, o LeaderOptions) (info LeaderInfo, ok bool, err error) {
	ns := o.Namespace
	if ns == "" {
		ns = "default"
	}
	v, _, err := c.Variables().Read(InfoPath(o.Path), (&api.QueryOptions{Namespace: ns}).WithContext(ctx))
	if errors.Is(err, api.ErrVariablePathNotFound) {
		return info, false, nil
	}
	if err != nil || v == nil {
		return info, false, err
	}
	info.StatusAddr, info.LeaseAddr = v.Items["status_addr"], v.Items["lease_addr"]
	info.Since, _ = time.Parse(time.RFC3339Nano, v.Items["since"])
	return info, info.StatusAddr != "", nil
}

// acquireLock asks for the lock once: the lease's ID, or an error wrapping
// api.ErrLockConflict while another holds it. (api.Locks keeps the ID to
// itself; a LeaseFile needs it.)
func acquireLock(c *api.Client, wo api.WriteOptions, o LeaderOptions) (string, error) {
	out, _, err := c.Variables().AcquireLock(&api.Variable{Namespace: o.Namespace, Path: o.Path,
		Lock: &api.VariableLock{TTL: o.TTL.String()}}, &wo)
	if err != nil {
		var ue api.UnexpectedResponseError
		if errors.As(err, &ue) && ue.HasStatusCode() && ue.StatusCode() == http.StatusConflict {
			return "", fmt.Errorf("acquire conflict %w", api.ErrLockConflict)
		}
		return "", err
	}
	if out == nil || out.Lock == nil || out.Lock.ID == "" {
		return "", fmt.Errorf("state: Nomad granted the lock %s without a lock ID", o.Path)
	}
	return out.Lock.ID, nil
}

// resumeLease renews the lease o.Lease keeps, if any: its ID when Nomad
// still holds it for us (the previous agent on this host died within twice
// the TTL), else "" and the file forgets it. Nomad unreachable is retried
// for one TTL, after which the lease may be gone anyway.
func resumeLease(ctx context.Context, c *api.Client, wo api.WriteOptions, o LeaderOptions) string {
	id := o.Lease.id(o.Namespace, o.Path)
	if id == "" {
		return ""
	}
	deadline := time.Now().Add(o.TTL)
	for {
		_, _, err := c.Variables().RenewLock(&api.Variable{Namespace: o.Namespace, Path: o.Path,
			Lock: &api.VariableLock{ID: id}}, &wo)
		if err == nil {
			if o.OnResume != nil {
				o.OnResume()
			}
			return id
		}
		if !Transient(err) || time.Now().After(deadline) || ctx.Err() != nil {
			_ = o.Lease.clear() // expired or taken: acquire afresh
			return ""
		}
		if o.OnRetry != nil {
			o.OnRetry(err)
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(time.Second):
		}
	}
}
