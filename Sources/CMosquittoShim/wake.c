// Waking the network loop (any thread): the wake-up pipe that ends the loop's poll, and the request for a dispatch
// round. The bottom of the shim besides library.c: it calls no other file (see shim_internal.h for the graph).

#include "shim_internal.h"

/// Opens the loop's wake-up channel, a non-blocking pipe (see wakeFd); both descriptors stay -1 when that fails.
/// (An eventfd saved nothing measurable: publisher CPU 1.05 / 1.25 µs per message with / without it, 3.05 / 3.20 with
/// every publish queued in libmosquitto; see shim_internal.h.)
SHIM_HIDDEN void openWakeChannel(CMosquittoShim_Client *c) {
    int ends[2];
    c->wake.wakeFd = -1;
    c->wake.wakeWriteFd = -1;
    if (pipe(ends) != 0) return;
    for (int i = 0; i < 2; i++) {
        (void)fcntl(ends[i], F_SETFL, fcntl(ends[i], F_GETFL) | O_NONBLOCK);
        (void)fcntl(ends[i], F_SETFD, FD_CLOEXEC);
    }
    c->wake.wakeFd = ends[0];
    c->wake.wakeWriteFd = ends[1];
}

/// Ends the network loop's current (or next) poll.
SHIM_HIDDEN void signalLoop(CMosquittoShim_Client *c) {
    char one = 1;
    (void)!write(c->wake.wakeWriteFd, &one, 1);
}

/// Empties the wake-up channel after a poll saw it readable.
SHIM_HIDDEN void drainWakeChannel(CMosquittoShim_Client *c) {
    char bytes[64];
    (void)!read(c->wake.wakeFd, bytes, sizeof(bytes));  // more than one byte waiting only wakes the next poll early
}

/// Ends the loop thread's poll if it is in one (at most one pipe write per wait). Callers first publish what the
/// loop must see (a counter, a flag it reads before polling), sequentially consistent, so either the loop sees it or
/// this call wakes it.
SHIM_HIDDEN void wakeLoopIfPolling(CMosquittoShim_Client *c) {
    if (atomic_load(&c->wake.loopPolling) && !atomic_exchange(&c->wake.wakePending, true)) signalLoop(c);
}

/// Called by any thread after it queued a packet in libmosquitto: counts it and wakes the loop thread if it polls.
/// `packetsQueued` is incremented before `loopPolling` is read, and loopOnce sets `loopPolling` before it reads
/// `packetsQueued` (both sequentially consistent), so either the loop sees the packet or this call wakes it.
SHIM_HIDDEN void wakeLoop(CMosquittoShim_Client *c) {
    atomic_fetch_add(&c->wake.packetsQueued, 1);
    wakeLoopIfPolling(c);
}

/// Asks the loop thread for a dispatch round soon (any thread): a loop step that is waiting ends (its poll through the
/// wake-up pipe, a backoff sleep through controlCond), and the next one does not wait. `dispatchWanted` is set before
/// `loopPolling` and `backingOff` are read, and the loop sets those before it reads `dispatchWanted` (all
/// sequentially consistent), so either the loop sees the request or this call wakes it. While the loop connects
/// (libmosquitto's own loop, SHIM_CONNECTING_STEP_MS steps) the round comes after the current step.
SHIM_HIDDEN void wantDispatch(CMosquittoShim_Client *c) {
    atomic_store(&c->wake.dispatchWanted, true);
    wakeLoopIfPolling(c);
    if (atomic_load(&c->wake.backingOff)) {
        pthread_mutex_lock(&c->control.controlLock);
        pthread_cond_broadcast(&c->control.controlCond);
        pthread_mutex_unlock(&c->control.controlLock);
    }
}
