package lease

import (
	"log/slog"
	"time"
)

// The Manager's log records (see WithLogger and the LogKey and Event
// names). Each helper asks the logger first, so a disabled level builds
// no record and allocates nothing; none is called under a lock.

// logOn reports whether the logger records level.
func (m *Manager) logOn(level slog.Level) bool { return m.cfg.logger.Enabled(bgCtx, level) }

// logEvent logs one record with its event attribute first.
func (m *Manager) logEvent(level slog.Level, msg, event string, attrs ...slog.Attr) {
	m.cfg.logger.LogAttrs(bgCtx, level, msg, append([]slog.Attr{slog.String(LogKeyEvent, event)}, attrs...)...)
}

func (m *Manager) logAcquired(l *Lease) {
	if m.logOn(slog.LevelInfo) {
		m.logEvent(slog.LevelInfo, "lease acquired", EventAcquired,
			slog.String(LogKeyLock, l.name), slog.Uint64(LogKeyToken, l.token))
	}
}

// logReleased logs the end of a release; err is its store call's
// outcome (nil, or ErrNotHeld: the grant had already ended).
func (m *Manager) logReleased(l *Lease, err error) {
	if !m.logOn(slog.LevelInfo) {
		return
	}
	if err != nil {
		m.logEvent(slog.LevelInfo, "lease released", EventReleased,
			slog.String(LogKeyLock, l.name), slog.Uint64(LogKeyToken, l.token), slog.Any(LogKeyError, err))
		return
	}
	m.logEvent(slog.LevelInfo, "lease released", EventReleased,
		slog.String(LogKeyLock, l.name), slog.Uint64(LogKeyToken, l.token))
}

// lossMessages explain each cause of a loss.
var lossMessages = [nCauses]string{
	causeDeadline: "lease lost: no renewal confirmed before the deadline",
	causeNotHeld:  "lease lost: the store reports another grant",
	causeStopped:  "lease abandoned: Stop's context ended before the callbacks returned",
}

// logLost logs a lease that ended without a release; owner is the owner
// the store reported, if any.
func (m *Manager) logLost(name string, token uint64, c cause, owner string) {
	if !m.logOn(slog.LevelWarn) {
		return
	}
	attrs := []slog.Attr{slog.String(LogKeyLock, name), slog.Uint64(LogKeyToken, token), slog.String(LogKeyCause, causeNames[c])}
	if owner != "" {
		attrs = append(attrs, slog.String(LogKeyOwner, owner))
	}
	m.logEvent(slog.LevelWarn, lossMessages[c], EventLost, attrs...)
}

// logLeader logs leadership gained, or ended (lost tells whether its
// lease was lost rather than released).
func (m *Manager) logLeader(l *Lease, gained, lost bool) {
	switch {
	case gained:
		if m.logOn(slog.LevelInfo) {
			m.logEvent(slog.LevelInfo, "leadership gained", EventLeaderGained,
				slog.String(LogKeyLock, l.name), slog.Uint64(LogKeyToken, l.token))
		}
	case lost:
		if m.logOn(slog.LevelWarn) {
			m.logEvent(slog.LevelWarn, "leadership lost", EventLeaderLost,
				slog.String(LogKeyLock, l.name), slog.Uint64(LogKeyToken, l.token), slog.String(LogKeyCause, "lost"))
		}
	default:
		if m.logOn(slog.LevelInfo) {
			m.logEvent(slog.LevelInfo, "leadership ended", EventLeaderLost,
				slog.String(LogKeyLock, l.name), slog.Uint64(LogKeyToken, l.token), slog.String(LogKeyCause, "released"))
		}
	}
}

func (m *Manager) logRenewed(l *Lease) {
	if m.logOn(slog.LevelDebug) {
		m.logEvent(slog.LevelDebug, "lease renewed", EventRenewed,
			slog.String(LogKeyLock, l.name), slog.Uint64(LogKeyToken, l.token))
	}
}

func (m *Manager) logRenewFailed(l *Lease, attempt int, err error) {
	if m.logOn(slog.LevelWarn) {
		m.logEvent(slog.LevelWarn, "renew failed", EventRenewFailed,
			slog.String(LogKeyLock, l.name), slog.Uint64(LogKeyToken, l.token),
			slog.Int(LogKeyAttempt, attempt), slog.Any(LogKeyError, err))
	}
}

func (m *Manager) logWaiting(name, owner string, retryIn time.Duration) {
	if m.logOn(slog.LevelDebug) {
		m.logEvent(slog.LevelDebug, "lock held elsewhere; waiting", EventWaiting,
			slog.String(LogKeyLock, name), slog.String(LogKeyOwner, owner), slog.Duration(LogKeyRetryIn, retryIn))
	}
}

func (m *Manager) logAcquireFailed(name string, err error) {
	if m.logOn(slog.LevelWarn) {
		m.logEvent(slog.LevelWarn, "acquire failed", EventAcquireFailed,
			slog.String(LogKeyLock, name), slog.Any(LogKeyError, err))
	}
}

func (m *Manager) logReleaseFailed(name string, token uint64, err error) {
	if m.logOn(slog.LevelWarn) {
		m.logEvent(slog.LevelWarn, "release failed", EventReleaseFailed,
			slog.String(LogKeyLock, name), slog.Uint64(LogKeyToken, token), slog.Any(LogKeyError, err))
	}
}

func (m *Manager) logWatchFailed(name string, err error) {
	if m.logOn(slog.LevelWarn) {
		m.logEvent(slog.LevelWarn, "watch: get failed", EventWatchFailed,
			slog.String(LogKeyLock, name), slog.Any(LogKeyError, err))
	}
}

func (m *Manager) logWorkFailed(l *Lease, err error) {
	if m.logOn(slog.LevelWarn) {
		m.logEvent(slog.LevelWarn, "scheduled work failed", EventWorkFailed,
			slog.String(LogKeyLock, l.Name()), slog.Uint64(LogKeyToken, l.Token()), slog.Any(LogKeyError, err))
	}
}
