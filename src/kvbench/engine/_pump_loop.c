/* kvbench.engine._pump.Poller: the first step of a compiled event loop.
 *
 * On the asyncio path each read of each connection is an event-loop callback, a Python
 * call into Pump.data_received, and each batch of requests a call of transport.write.
 * A Poller owns its connections' sockets instead (raw non-blocking fds, an epoll set of
 * its own) and the event loop watches only the epoll fd: one Python call, poll(), per
 * wake-up services every ready socket in C. Per ready socket it reads what the kernel
 * has, hands it to the connection's pump (the same scan, tally and issue as
 * Pump.received), and the pump's requests go out with one send from the pump's buffer;
 * what the socket does not take is kept and sent when it is writable (EPOLLOUT). No
 * Python frame runs per read, per write or per request.
 *
 * A connection is in one of two modes. Reader mode (no pump set): each read is handed
 * to a Python callable as bytes (the setup's replies, the preload's Python pump, the
 * first reads that tell a refusal): asyncio's Protocol.data_received, as a transport
 * would. Pump mode (set_pump): reads go to a compiled Pump in C, and the pump's status
 * goes to its ``on_stopped`` as Pump.data_received does.
 *
 * A connection's end (EOF, an error on recv or send) is Python's to handle: the socket
 * leaves the set and is closed here, then ``on_end(handle, errno)`` is called (errno 0:
 * the server closed it), and the worker counts and reopens it (engine/loop.py). A handle
 * is the slot's index and a generation: a stale handle (a connection ended and its slot
 * reused) names nothing, and calls with it do nothing.
 *
 * An open loop's schedule (schedule(), below) runs here too: a timerfd in the same set,
 * serviced before the sockets of a poll and between them once a send is due, the due
 * requests sent in C through the pumps' issue_scheduled code.
 *
 * Level-triggered epoll: a socket read only in part (one recv of less than asked means
 * the kernel had no more, so no second recv is spent to see EAGAIN; a full scratch buffer
 * waits for the next poll) is reported again.
 *
 * Ticks (start_ticks): a periodic timerfd in the same epoll set measures the event loop's
 * hiccups in C, as the worker's Python hiccup task does on the other drivers (jHiccup's
 * idea: a timer due every period, and how late the loop wakes for it; a busy or blocked
 * loop delays every reply it reads by as much). Its expiries are a fixed grid (armed at an
 * absolute time); when a poll finds it expired, the clock read as the poll wakes, less
 * the first expiry not read yet, is one hiccup, recorded into the tally's histogram, and
 * every few ticks the tally's requests in flight are sampled (Little's law). No Python
 * runs for it: the worker's 1,000 Python wake-ups a second become a read of the timerfd
 * inside the poll the loop makes anyway.
 */
#include "_pump.h"
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <structmember.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* send, recv and epoll_wait as the system calls themselves: libc's wrappers are
 * cancellation points, and in a worker (forked by a process that had threads) each call
 * switched asynchronous cancellation on and off around it: 1.5-2% of a pipeline-1 run's
 * client CPU, by perf. Nothing here is ever cancelled. (AddressSanitizer's interceptors
 * no longer see these calls: their buffers are the poller's scratch and tails, and the
 * pumps' own, each bounded where it is filled.) */
static inline Py_ssize_t
sys_send(int fd, const void *p, size_t n)
{
    return syscall(SYS_sendto, fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT, NULL, 0);
}

static inline Py_ssize_t
sys_recv(int fd, void *p, size_t n)
{
    return syscall(SYS_recvfrom, fd, p, n, 0, NULL, NULL);
}

static inline int
sys_epoll_wait(int epfd, struct epoll_event *events, int n, int timeout_ms)
{
    /* (epoll_pwait with no mask, so its size is not read: aarch64 has no epoll_wait) */
    return (int)syscall(SYS_epoll_pwait, epfd, events, n, timeout_ms, NULL, _NSIG / 8);
}

/* Events taken per epoll_wait, and the bytes read from one socket per poll. */
#define POLL_EVENTS 256
#define SCRATCH_BYTES (256 * 1024)
/* The epoll data of the poller's own descriptors, none a slot's handle (a slot index is
 * below 2**32 - 3): the ticks' timerfd, the wake fd (wake_on), the schedule's timerfd. */
#define TICK_HANDLE UINT64_MAX
#define WAKE_TAG (UINT64_MAX - 1)
#define TIMER_HANDLE (UINT64_MAX - 2)

typedef struct {
    int fd;          /* -1: a free slot */
    uint32_t gen;    /* bumped when the slot is freed */
    int writing;     /* EPOLLOUT is asked for (a tail is waiting) */
    int err;         /* a send failed with this errno: the end is due */
    PyObject *pump;  /* pump mode: a Pump sending on this slot (strong), or NULL */
    PyObject *reader; /* reader mode: data_received(bytes) (strong) */
    char *out;       /* the unsent tail: out[out_pos:out_len] */
    Py_ssize_t out_pos, out_len, out_cap;
} Slot;

/* Intended times not sent or dropped yet: times[head:head + len] are of requests next ..
 * next + len - 1 (of the schedule, or of a lane's own); times[head:head + counted] were due
 * at the last dispatch (shared: a backlog is not counted again). */
typedef struct {
    long long *times;
    Py_ssize_t head, len, cap, counted;
    long long next;       /* requests sent or dropped so far */
} Times;

/* One connection of the open loop's schedule: its pump (strong; NULL: down, or not set up
 * yet: it is skipped) and its pipeline depth; with a schedule per lane, its own times (it
 * is in the heap while it holds any). */
typedef struct {
    PyObject *pump;
    Py_ssize_t pipeline;
    Times own;
    int fed_all;          /* feed() had no more for it */
    int ended;            /* and it sent or dropped the last of them */
} Lane;

/* The open loop's schedule (schedule()): the intended times of the requests not yet sent or
 * dropped, fed by Python, and the connections they go to: the shared times round robin, or
 * each lane its own (per_lane), the lanes holding times in a min-heap by the next one. */
typedef struct {
    int active;
    int tfd;              /* the timerfd in the epoll set, or -1 */
    int dispatching;      /* in dispatch: schedule() and unschedule() are refused */
    int per_lane;         /* each lane its own times (a timed replay) */
    int primed;           /* per_lane: every lane was fed once */
    PyObject *tally, *feed, *on_behind, *on_stop; /* strong while active */
    long long max_lag_ns, period_ns, tick_ns;
    Lane *lanes;
    Py_ssize_t n_lanes, turn;
    Times shared;
    long long next;       /* requests sent or dropped so far, every lane's */
    Py_ssize_t *heap, *due; /* per_lane: the heap of lanes; a dispatch's due ones */
    Py_ssize_t n_heap, ended;
    long long wake_ns;    /* dispatch once the clock reaches this, between reads too */
    long long periodic;   /* the timer fires every this many ns; 0: once (or not armed) */
} Sched;

struct Poller {
    PyObject_HEAD
    Sched sched;
    int epfd;
    Slot *slots;
    Py_ssize_t n_slots, cap, live;
    /* No free slot below this one: add() looks from here (from 0 it walked every slot
     * in use, 5 * 10^7 steps to add 10,000 connections). */
    Py_ssize_t free_from;
    PyObject *on_end;
    char *scratch;
    int polling;      /* in poll(): poll() again is refused */
    int ends_due;     /* a slot's err is set: poll() ends it */
    int wake_fd;      /* wait() returns when it is readable; -1: none */
    long long spin_ns; /* wait() polls this long before it sleeps (busy_poll_ns) */
    /* Ticks: the timerfd (-1: none), the tally they go to, the period, the first expiry
     * not read yet, the ticks seen, and every how many a sample of requests in flight. */
    int tick_fd;
    PyObject *tick_tally;
    long long tick_period, tick_next, ticks;
    int sample_every;
    struct epoll_event events[POLL_EVENTS];
};

static PyTypeObject PollerType;

static inline uint64_t
handle_of(const Poller *self, Py_ssize_t i)
{
    return (uint64_t)i | (uint64_t)self->slots[i].gen << 32;
}

/* The slot a handle names, or -1 (stale, or never one). */
static Py_ssize_t
slot_of(const Poller *self, uint64_t handle)
{
    Py_ssize_t i = (Py_ssize_t)(handle & 0xFFFFFFFFu);
    if (i >= self->n_slots || self->slots[i].fd < 0 ||
        self->slots[i].gen != (uint32_t)(handle >> 32))
        return -1;
    return i;
}

static int
watch(Poller *self, Py_ssize_t i, int writing)
{
    Slot *s = &self->slots[i];
    struct epoll_event ev = {.events = EPOLLIN | (writing ? EPOLLOUT : 0),
                             .data.u64 = handle_of(self, i)};
    if (epoll_ctl(self->epfd, EPOLL_CTL_MOD, s->fd, &ev) < 0)
        return -1;
    s->writing = writing;
    return 0;
}

static void
fail_slot(Poller *self, Slot *s, int err)
{
    if (!s->err)
        s->err = err;
    self->ends_due = 1;
}

/* Keep out[from:n] of a send as the slot's tail, and ask to hear when it can go. */
static void
keep_tail(Poller *self, Py_ssize_t i, const char *p, Py_ssize_t n)
{
    Slot *s = &self->slots[i];
    if (s->out_pos && s->out_pos == s->out_len)
        s->out_pos = s->out_len = 0;
    if (s->out_len + n > s->out_cap) {
        if (s->out_pos) { /* the sent head goes first */
            memmove(s->out, s->out + s->out_pos, (size_t)(s->out_len - s->out_pos));
            s->out_len -= s->out_pos;
            s->out_pos = 0;
        }
        Py_ssize_t cap = s->out_cap ? s->out_cap : 4096;
        while (cap < s->out_len + n)
            cap *= 2;
        char *out = PyMem_Realloc(s->out, (size_t)cap);
        if (out == NULL) {
            fail_slot(self, s, ENOMEM);
            return;
        }
        s->out = out;
        s->out_cap = cap;
    }
    memcpy(s->out + s->out_len, p, (size_t)n);
    s->out_len += n;
    if (!s->writing && watch(self, i, 1) < 0)
        fail_slot(self, s, errno);
}

void
poller_send(Poller *self, Py_ssize_t i, const char *p, Py_ssize_t n)
{
    Slot *s = &self->slots[i];
    if (s->fd < 0 || s->err || n <= 0)
        return;
    if (s->out_len > s->out_pos) { /* behind a tail: in order after it */
        keep_tail(self, i, p, n);
        return;
    }
    Py_ssize_t k;
    do
        k = sys_send(s->fd, p, (size_t)n);
    while (k < 0 && errno == EINTR);
    if (k == n)
        return;
    if (k < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            fail_slot(self, s, errno);
            return;
        }
        k = 0;
    }
    keep_tail(self, i, p + k, n - k);
}

/* The socket is writable: send the tail; when it is all gone, stop asking. */
static void
flush(Poller *self, Py_ssize_t i)
{
    Slot *s = &self->slots[i];
    while (s->out_pos < s->out_len) {
        Py_ssize_t k = sys_send(s->fd, s->out + s->out_pos, (size_t)(s->out_len - s->out_pos));
        if (k < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                fail_slot(self, s, errno);
            return;
        }
        s->out_pos += k;
    }
    s->out_pos = s->out_len = 0;
    if (s->writing && watch(self, i, 0) < 0)
        fail_slot(self, s, errno);
}

/* Free slot ``i``: out of the set, closed, its pump writing with ``write`` again. */
static void
release(Poller *self, Py_ssize_t i)
{
    Slot *s = &self->slots[i];
    epoll_ctl(self->epfd, EPOLL_CTL_DEL, s->fd, NULL);
    close(s->fd);
    s->fd = -1;
    s->gen++;
    s->err = s->writing = 0;
    if (s->pump != NULL)
        pump_detach(s->pump);
    Py_CLEAR(s->pump);
    Py_CLEAR(s->reader);
    PyMem_Free(s->out);
    s->out = NULL;
    s->out_pos = s->out_len = s->out_cap = 0;
    self->live--;
    if (i < self->free_from)
        self->free_from = i;
}

/* The connection ended (errno ``err``, 0: closed by the server): freed, then Python is
 * told. -1 with the callback's exception. */
static int
end(Poller *self, Py_ssize_t i, int err)
{
    uint64_t handle = handle_of(self, i);
    release(self, i);
    if (self->on_end == Py_None)
        return 0;
    pump_python_calls++;
    PyObject *result = PyObject_CallFunction(self->on_end, "Ki", (unsigned long long)handle, err);
    if (result == NULL)
        return -1;
    Py_DECREF(result);
    return 0;
}

/* Read what socket ``i`` has and hand it on: to its pump (and the pump's status to its
 * on_stopped), or to its reader. Then an end it met. -1 with an exception (a callback's). */
static int
service_read(Poller *self, Py_ssize_t i)
{
    Slot *s = &self->slots[i];
    uint64_t handle = handle_of(self, i);
    Py_ssize_t len = 0;
    int eof = 0, err = 0;
    while (len < SCRATCH_BYTES) {
        Py_ssize_t want = SCRATCH_BYTES - len;
        Py_ssize_t k = sys_recv(s->fd, self->scratch + len, (size_t)want);
        if (k > 0) {
            len += k;
            if (k < want) /* the kernel had no more: no recv spent to see EAGAIN */
                break;
            continue;
        }
        if (k == 0)
            eof = 1;
        else if (errno == EINTR)
            continue;
        else if (errno != EAGAIN && errno != EWOULDBLOCK)
            err = errno;
        break;
    }
    if (len > 0) {
        if (s->pump != NULL) {
            PyObject *pump = Py_NewRef(s->pump); /* its callbacks may end the slot */
            int status = pump_feed(pump, self->scratch, len);
            if (status > 0) {
                PyObject *stopped = pump_on_stopped(pump);
                if (stopped != NULL && stopped != Py_None) {
                    Py_INCREF(stopped);
                    pump_python_calls++;
                    PyObject *result = PyObject_CallFunction(stopped, "i", status);
                    Py_DECREF(stopped);
                    status = result != NULL ? 0 : -1;
                    Py_XDECREF(result);
                }
            }
            Py_DECREF(pump);
            if (status < 0)
                return -1;
        }
        else if (s->reader != NULL) {
            PyObject *reader = Py_NewRef(s->reader);
            PyObject *data = PyBytes_FromStringAndSize(self->scratch, len);
            pump_python_calls++;
            PyObject *result = data != NULL ? PyObject_CallOneArg(reader, data) : NULL;
            Py_XDECREF(data);
            Py_DECREF(reader);
            if (result == NULL)
                return -1;
            Py_DECREF(result);
        }
        i = slot_of(self, handle); /* ended or closed by a callback: nothing more here */
        if (i < 0)
            return 0;
    }
    if (eof || err)
        return end(self, i, err);
    return 0;
}

/* -- the open loop's schedule -------------------------------------------------------------
 *
 * The dispatcher of engine/open_loop.py, in C (engine/loop_dispatch.py is its Python
 * side): a timerfd in the poller's own epoll set is armed for the next send, and poll()
 * services it before any socket, and again between ready sockets once the clock passes the
 * wake-up (a long batch of reads does not hold a due send back). The intended times are
 * Python's (``feed``), and a backlog behind ``max_lag_ns`` goes to Python (``on_behind``),
 * which drops it as the Python dispatcher does. The wake-ups are the Python dispatcher's:
 * at the next request's slot, no sooner than ``period_ns`` after the last, at least every
 * ``tick_ns``. Two kinds of schedule, as the Python dispatcher's routes:
 *
 * Shared (``--rate``): one schedule for every lane. A dispatch sends what is due, round
 * robin from the last connection given requests, to the lanes with room below their
 * pipeline, each lane's share in one write with its intended times (the pumps'
 * issue_scheduled code: lags recorded, late ones counted). The times are the Python
 * Schedule's (the same for a seed), taken SCHED_FEED at a time.
 *
 * Own (a timed replay, ``per_lane``): each lane its own times, its connection's requests
 * at their trace times, taken LANE_FEED at a time, and a min-heap of the lanes by their
 * next request's time: a dispatch takes from the heap the lanes with a request due (not
 * every lane: at 10,000 connections most have nothing due), sends each one's due
 * requests (as many as its room) in one write, and puts it back at its next time. A lane
 * whose feed has no more ends; once every lane has, the schedule stops as when the budget
 * is spent.
 */

/* Intended times asked of feed() at a time (shared; each lane's own), and the most
 * requests one dispatch counts due (a lane's room bounds each send anyway: the next
 * dispatch sends the rest). */
#define SCHED_FEED 4096
#define LANE_FEED 128
#define SCHED_MAX_DUE (1 << 16)

static long long
clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Arm the timer: periodically every ``period`` ns from now, else once at ``when``. */
static int
sched_arm(Sched *q, long long when, long long period)
{
    struct itimerspec spec = {0};
    int flags = 0;
    if (period) {
        if (q->periodic == period)
            return 0;
        spec.it_value.tv_sec = spec.it_interval.tv_sec = (time_t)(period / 1000000000LL);
        spec.it_value.tv_nsec = spec.it_interval.tv_nsec = (long)(period % 1000000000LL);
    }
    else {
        if (when < 1) /* an it_value of 0 disarms */
            when = 1;
        spec.it_value.tv_sec = (time_t)(when / 1000000000LL);
        spec.it_value.tv_nsec = (long)(when % 1000000000LL);
        flags = TFD_TIMER_ABSTIME;
    }
    if (timerfd_settime(q->tfd, flags, &spec, NULL) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    q->periodic = period;
    return 0;
}

static void
times_clear(Times *t)
{
    PyMem_Free(t->times);
    *t = (Times){0};
}

/* Everything the schedule holds let go, the timer closed (out of the set). */
static void
sched_clear(Poller *self)
{
    Sched *q = &self->sched;
    if (q->tfd >= 0) {
        if (self->epfd >= 0)
            epoll_ctl(self->epfd, EPOLL_CTL_DEL, q->tfd, NULL);
        close(q->tfd);
    }
    q->tfd = -1;
    q->active = 0;
    for (Py_ssize_t i = 0; i < q->n_lanes; i++) {
        Py_CLEAR(q->lanes[i].pump);
        times_clear(&q->lanes[i].own);
    }
    PyMem_Free(q->lanes);
    q->lanes = NULL;
    q->n_lanes = q->turn = 0;
    times_clear(&q->shared);
    PyMem_Free(q->heap);
    PyMem_Free(q->due);
    q->heap = q->due = NULL;
    q->n_heap = q->ended = 0;
    q->per_lane = q->primed = 0;
    q->periodic = 0; /* (next is kept: scheduled reads it after the schedule ends) */
    Py_CLEAR(q->tally);
    Py_CLEAR(q->feed);
    Py_CLEAR(q->on_behind);
    Py_CLEAR(q->on_stop);
}

/* Ask Python for the intended times after those ``t`` holds (shared: feed(first, count);
 * a lane's own: feed(lane, first, count)): the number added (0: no more), or -1 with an
 * exception. */
static Py_ssize_t
times_feed(Sched *q, Times *t, Py_ssize_t lane)
{
    pump_python_calls++;
    Py_ssize_t want = lane < 0 ? SCHED_FEED : LANE_FEED;
    PyObject *data = lane < 0
                         ? PyObject_CallFunction(q->feed, "Ln", t->next + t->len, want)
                         : PyObject_CallFunction(q->feed, "nLn", lane, t->next + t->len, want);
    if (data == NULL)
        return -1;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(data);
        return -1;
    }
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(long long);
    int failed = view.len % (Py_ssize_t)sizeof(long long) != 0;
    if (failed)
        PyErr_SetString(PyExc_ValueError, "feed() must return native int64 times");
    if (!failed && t->head) { /* the sent ones go first */
        memmove(t->times, t->times + t->head, (size_t)t->len * sizeof(long long));
        t->head = 0;
    }
    if (!failed && t->len + n > t->cap) {
        Py_ssize_t cap = t->cap ? t->cap : want;
        while (cap < t->len + n)
            cap *= 2;
        long long *times = PyMem_Realloc(t->times, (size_t)cap * sizeof(long long));
        if (times == NULL) {
            PyErr_NoMemory();
            failed = 1;
        }
        else {
            t->times = times;
            t->cap = cap;
        }
    }
    if (!failed && n) { /* (none: a lane's may never have been given a buffer) */
        memcpy(t->times + t->len, view.buf, (size_t)n * sizeof(long long));
        t->len += n;
    }
    PyBuffer_Release(&view);
    Py_DECREF(data);
    return failed ? -1 : n;
}

/* Requests gone from ``t``: sent (n <= len), or dropped by Python (maybe more than held). */
static void
times_skip(Sched *q, Times *t, long long n)
{
    t->counted = n < t->counted ? t->counted - (Py_ssize_t)n : 0;
    if (n >= t->len)
        t->head = t->len = 0;
    else {
        t->head += (Py_ssize_t)n;
        t->len -= (Py_ssize_t)n;
    }
    t->next += n;
    q->next += n; /* (every lane's: the shared times' own count, when shared) */
}

/* A backlog behind max_lag: Python drops it (counted by op, taken from the sources in
 * turn) and says how many, and whether to send nothing now (1). -1 with an exception. */
static int
times_behind(Sched *q, Times *t, Py_ssize_t lane, long long now)
{
    pump_python_calls++;
    PyObject *result = lane < 0
                           ? PyObject_CallFunction(q->on_behind, "LL", now, t->next)
                           : PyObject_CallFunction(q->on_behind, "nLL", lane, now, t->next);
    long long dropped;
    int stop;
    if (result == NULL)
        return -1;
    if (!PyArg_ParseTuple(result, "Lp", &dropped, &stop)) {
        Py_DECREF(result);
        return -1;
    }
    Py_DECREF(result);
    if (dropped < 0) {
        PyErr_SetString(PyExc_ValueError, "on_behind() dropped fewer than none");
        return -1;
    }
    times_skip(q, t, dropped);
    return stop;
}

/* Send ``n`` of the times ``t`` holds with ``lane``'s pump. -1 with an exception. */
static int
lane_send(Sched *q, Times *t, Lane *lane, Py_ssize_t n)
{
    long long *budget = tally_budget(q->tally);
    if (*budget >= 0)
        *budget -= n;
    PyObject *pump = Py_NewRef(lane->pump); /* (a refill runs Python code) */
    int sent = pump_send_scheduled(pump, n, t->times + t->head);
    Py_DECREF(pump);
    if (sent < 0)
        return -1;
    times_skip(q, t, n);
    return 0;
}

/* A shared schedule: send (or drop) what is due by ``now``, the Python dispatcher's
 * _dispatch_route over a route of every lane. */
static int
shared_send_due(Sched *q, long long now)
{
    Times *t = &q->shared;
    if (t->len == 0 && times_feed(q, t, -1) < 0)
        return -1;
    if (t->len == 0 || t->times[t->head] > now)
        return 0;
    long long *budget = tally_budget(q->tally);
    if (t->times[t->head] < now - q->max_lag_ns) {
        int stop = times_behind(q, t, -1, now);
        if (stop)
            return stop < 0 ? -1 : 0;
    }
    /* How many are due: counted in the times held, more fed while all of them are; from
     * where the last dispatch stopped counting (a backlog is not counted again each time:
     * the times are in order, and the clock does not go back). */
    Py_ssize_t due = t->counted < t->len ? t->counted : t->len;
    for (;;) {
        while (due < t->len && due < SCHED_MAX_DUE && t->times[t->head + due] <= now)
            due++;
        if (due < t->len || due >= SCHED_MAX_DUE)
            break;
        Py_ssize_t fed = times_feed(q, t, -1);
        if (fed < 0)
            return -1;
        if (fed == 0)
            break;
    }
    t->counted = due;
    if (*budget >= 0 && due > *budget)
        due = (Py_ssize_t)*budget;
    Py_ssize_t count = q->n_lanes, start = q->turn, last = -1;
    for (Py_ssize_t k = 0; k < count && due; k++) {
        Lane *lane = &q->lanes[(start + k) % count];
        if (lane->pump == NULL)
            continue;
        Py_ssize_t room = lane->pipeline - pump_inflight(lane->pump);
        if (room <= 0)
            continue;
        Py_ssize_t n = room < due ? room : due;
        if (lane_send(q, t, lane, n) < 0)
            return -1;
        due -= n;
        last = k;
    }
    q->turn = count ? (start + last + 1) % count : 0;
    return 0;
}

/* -- the lanes' heap: by each lane's next request's time (a lane is in it while it holds
 * times: one that holds none has ended) -- */

static inline long long
lane_due(const Sched *q, Py_ssize_t lane)
{
    const Times *t = &q->lanes[lane].own;
    return t->times[t->head];
}

/* Put ``lane`` in the heap (it holds times). */
static void
heap_push(Sched *q, Py_ssize_t lane)
{
    long long due = lane_due(q, lane);
    Py_ssize_t at = q->n_heap++;
    while (at > 0) {
        Py_ssize_t parent = (at - 1) / 2;
        if (lane_due(q, q->heap[parent]) <= due)
            break;
        q->heap[at] = q->heap[parent];
        at = parent;
    }
    q->heap[at] = lane;
}

/* Take the earliest lane out of the heap (it is not empty). */
static Py_ssize_t
heap_pop(Sched *q)
{
    Py_ssize_t top = q->heap[0], lane = q->heap[--q->n_heap];
    if (q->n_heap == 0)
        return top;
    long long due = lane_due(q, lane);
    Py_ssize_t at = 0;
    for (;;) {
        Py_ssize_t child = 2 * at + 1;
        if (child >= q->n_heap)
            break;
        if (child + 1 < q->n_heap && lane_due(q, q->heap[child + 1]) < lane_due(q, q->heap[child]))
            child++;
        if (lane_due(q, q->heap[child]) >= due)
            break;
        q->heap[at] = q->heap[child];
        at = child;
    }
    q->heap[at] = lane;
    return top;
}

/* Feed a lane that holds fewer than ``want`` times until it holds as many or has no more
 * (``ended``, counted once its last time is gone). -1 with an exception. */
static int
lane_fill(Sched *q, Py_ssize_t i, Py_ssize_t want)
{
    Lane *lane = &q->lanes[i];
    while (!lane->fed_all && lane->own.len < want) {
        Py_ssize_t fed = times_feed(q, &lane->own, i);
        if (fed < 0)
            return -1;
        if (fed == 0)
            lane->fed_all = 1;
    }
    return 0;
}

/* After a lane's send (or drops): back in the heap at its next time, or ended. */
static int
lane_settle(Sched *q, Py_ssize_t i)
{
    Lane *lane = &q->lanes[i];
    if (lane_fill(q, i, 1) < 0)
        return -1;
    if (lane->own.len)
        heap_push(q, i);
    else if (!lane->ended) {
        lane->ended = 1;
        q->ended++;
    }
    return 0;
}

/* Lane ``i`` (out of the heap) has a request due by ``now``: drop its backlog behind
 * max_lag, send what is due, as much as its room, in one write: the Python dispatcher's
 * _dispatch_route over the lane's own route. */
static int
lane_send_due(Sched *q, Py_ssize_t i, long long now)
{
    Lane *lane = &q->lanes[i];
    Times *t = &lane->own;
    if (t->times[t->head] < now - q->max_lag_ns) {
        int stop = times_behind(q, t, i, now);
        if (stop < 0 || lane_fill(q, i, 1) < 0)
            return -1;
        if (stop || t->len == 0 || t->times[t->head] > now)
            return 0;
    }
    if (lane->pump == NULL)
        return 0;
    Py_ssize_t room = lane->pipeline - pump_inflight(lane->pump);
    long long budget = *tally_budget(q->tally);
    if (budget >= 0 && room > budget)
        room = (Py_ssize_t)budget;
    /* The due ones among the times held, more fed only while every one held is due and
     * there is room for more (times due later are not fetched early). */
    Py_ssize_t n = 0;
    for (;;) {
        while (n < room && n < t->len && t->times[t->head + n] <= now)
            n++;
        if (n < t->len || n == room || lane->fed_all)
            break;
        if (lane_fill(q, i, t->len + 1) < 0)
            return -1;
    }
    return lane->pump != NULL && n > 0 ? lane_send(q, t, lane, n) : 0;
}

/* Each lane its own schedule: every lane with a request due by ``now`` sends (or drops)
 * it, earliest first. The first dispatch feeds every lane and fills the heap. */
static int
own_send_due(Sched *q, long long now)
{
    if (!q->primed) {
        q->primed = 1;
        for (Py_ssize_t i = 0; i < q->n_lanes; i++)
            if (lane_settle(q, i) < 0)
                return -1;
    }
    /* The due lanes leave the heap first (a lane with no room stays due: it is put back
     * below, to be asked again at the next dispatch), then each sends and goes back. */
    Py_ssize_t taken = 0;
    while (q->n_heap && lane_due(q, q->heap[0]) <= now)
        q->due[taken++] = heap_pop(q);
    int failed = 0;
    for (Py_ssize_t k = 0; k < taken; k++) {
        Py_ssize_t i = q->due[k];
        if (!failed)
            failed = lane_send_due(q, i, now) < 0;
        /* (after a failure the rest go back unsent: the schedule stops, whole) */
        if (failed) {
            if (q->lanes[i].own.len)
                heap_push(q, i);
        }
        else
            failed = lane_settle(q, i) < 0;
    }
    return failed ? -1 : 0;
}

static void sched_drain(Sched *q);

/* Stop the schedule and tell Python (``on_stop(exc)``; None: the worker stopped issuing, or
 * its budget is spent). -1 with on_stop's own exception. */
static int
sched_stop(Poller *self, PyObject *exc)
{
    Sched *q = &self->sched;
    PyObject *on_stop = Py_NewRef(q->on_stop);
    q->active = 0;
    struct itimerspec off = {0};
    timerfd_settime(q->tfd, 0, &off, NULL);
    sched_drain(q); /* (a fired timer stays readable: epoll would report it for ever) */
    q->periodic = 0;
    pump_python_calls++;
    PyObject *result = PyObject_CallOneArg(on_stop, exc != NULL ? exc : Py_None);
    Py_DECREF(on_stop);
    if (result == NULL)
        return -1;
    Py_DECREF(result);
    return 0;
}

/* When the next request is due (LLONG_MAX: none is held), feeding the shared schedule's
 * times if it holds none. -1 with an exception (then ``*first`` is not set). */
static int
sched_first_due(Sched *q, long long *first)
{
    if (q->per_lane) {
        *first = q->n_heap ? lane_due(q, q->heap[0]) : LLONG_MAX;
        return 0;
    }
    Times *t = &q->shared;
    if (t->len == 0 && times_feed(q, t, -1) < 0)
        return -1;
    *first = t->len ? t->times[t->head] : LLONG_MAX;
    return 0;
}

/* One dispatch (the Python dispatcher's _tick): send what is due, then arm the timer for
 * the next. A failure stops the schedule and goes to on_stop; -1 only with on_stop's own. */
static int
sched_run(Poller *self)
{
    Sched *q = &self->sched;
    long long *budget = tally_budget(q->tally);
    if (!tally_issuing(q->tally) || *budget == 0 ||
        (q->per_lane && q->primed && q->ended == q->n_lanes))
        return sched_stop(self, NULL);
    q->dispatching = 1;
    long long now = clock_ns(), first_due = LLONG_MAX;
    int failed = (q->per_lane ? own_send_due(q, now) : shared_send_due(q, now)) < 0;
    if (!failed)
        failed = sched_first_due(q, &first_due) < 0;
    if (!failed) {
        if (first_due - now <= q->period_ns) {
            failed = sched_arm(q, 0, q->period_ns) < 0;
            q->wake_ns = now + q->period_ns;
        }
        else {
            q->wake_ns = first_due < now + q->tick_ns ? first_due : now + q->tick_ns;
            failed = sched_arm(q, q->wake_ns, 0) < 0;
        }
    }
    q->dispatching = 0;
    if (!failed)
        return 0;
    PyObject *exc = PyErr_GetRaisedException();
    int status = sched_stop(self, exc);
    Py_DECREF(exc);
    return status;
}

/* The timerfd fired: its expiry count read (it is level-triggered in the set). */
static void
sched_drain(Sched *q)
{
    uint64_t expiries;
    while (read(q->tfd, &expiries, sizeof expiries) < 0 && errno == EINTR)
        ; /* (EAGAIN: re-armed since it fired, or not fired) */
}

/* -- the Python type ---------------------------------------------------------------------- */

static int
Poller_init(Poller *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"on_end", NULL};
    PyObject *on_end = Py_None;
    if (self->scratch != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Poller.__init__ was called already");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O", kwlist, &on_end))
        return -1;
    if (self->scratch != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Poller.__init__ was called already");
        return -1;
    }
    self->scratch = PyMem_Malloc(SCRATCH_BYTES);
    if (self->scratch == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (self->epfd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    Py_INCREF(on_end);
    Py_XSETREF(self->on_end, on_end);
    return 0;
}

static PyObject *
Poller_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    Poller *self = (Poller *)type->tp_alloc(type, 0);
    if (self != NULL)
        self->epfd = self->wake_fd = self->tick_fd = self->sched.tfd = -1;
    return (PyObject *)self;
}

static int
Poller_traverse(Poller *self, visitproc visit, void *arg)
{
    Py_VISIT(self->on_end);
    Py_VISIT(self->tick_tally);
    const Sched *q = &self->sched;
    Py_VISIT(q->tally);
    Py_VISIT(q->feed);
    Py_VISIT(q->on_behind);
    Py_VISIT(q->on_stop);
    for (Py_ssize_t i = 0; i < q->n_lanes; i++)
        Py_VISIT(q->lanes[i].pump);
    for (Py_ssize_t i = 0; i < self->n_slots; i++) {
        Py_VISIT(self->slots[i].pump);
        Py_VISIT(self->slots[i].reader);
    }
    return 0;
}

/* Every socket closed, no callback. */
static void
close_all(Poller *self)
{
    for (Py_ssize_t i = 0; i < self->n_slots; i++)
        if (self->slots[i].fd >= 0)
            release(self, i);
}

/* No more ticks: the timer closed (it leaves the epoll set with it). */
static void
stop_ticks(Poller *self)
{
    if (self->tick_fd >= 0)
        close(self->tick_fd);
    self->tick_fd = -1;
    Py_CLEAR(self->tick_tally);
}

static int
Poller_clear(Poller *self)
{
    sched_clear(self);
    close_all(self);
    stop_ticks(self);
    Py_CLEAR(self->on_end);
    return 0;
}

/* The timer expired (one or more times since the last read): one hiccup, how late the
 * loop woke (``woke``) for the first expiry not read yet. -1 with an exception. */
static int
tick(Poller *self, long long woke)
{
    uint64_t expired = 0;
    if (read(self->tick_fd, &expired, sizeof expired) != (ssize_t)sizeof expired ||
        expired == 0)
        return 0; /* (EAGAIN: not expired after all) */
    long long late = woke - self->tick_next;
    self->tick_next += (long long)expired * self->tick_period;
    self->ticks++;
    return tally_tick(self->tick_tally, late > 0 ? late : 0,
                      self->ticks % self->sample_every == 0);
}

static void
Poller_dealloc(Poller *self)
{
    PyObject_GC_UnTrack(self);
    Poller_clear(self);
    PyMem_Free(self->slots);
    PyMem_Free(self->scratch);
    if (self->epfd >= 0)
        close(self->epfd);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
ready(Poller *self)
{
    if (self->scratch == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Poller.__init__ was not called");
        return -1;
    }
    if (self->epfd < 0) {
        PyErr_SetString(PyExc_ValueError, "the poller is closed");
        return -1;
    }
    return 0;
}

/* The live slot of a handle argument, or -1 (with a ValueError when ``strict``). */
static Py_ssize_t
slot_arg(Poller *self, PyObject *arg, int strict)
{
    unsigned long long handle = PyLong_AsUnsignedLongLong(arg);
    if (handle == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    Py_ssize_t i = slot_of(self, handle);
    if (i < 0 && strict)
        PyErr_Format(PyExc_ValueError, "no connection %llu (ended or closed)", handle);
    return i;
}

PyDoc_STRVAR(Poller_add_doc,
"add(fd, reader) -> int\n\n"
"Own the connected non-blocking socket ``fd`` from now on (closed here when it ends or\n"
"is closed) and hand its reads to ``reader(bytes)`` until a pump is set: its handle.");

static PyObject *
Poller_add(Poller *self, PyObject *args)
{
    int fd;
    PyObject *reader;
    if (ready(self) < 0 || !PyArg_ParseTuple(args, "iO", &fd, &reader))
        return NULL;
    Py_ssize_t i = self->free_from;
    while (i < self->n_slots && self->slots[i].fd >= 0)
        i++;
    if (i == self->n_slots) {
        if (grow(&self->slots, &self->cap, i + 1, 64, sizeof(Slot)) < 0)
            return NULL;
        self->slots[i] = (Slot){.fd = -1};
        self->n_slots++;
    }
    Slot *s = &self->slots[i];
    struct epoll_event ev = {.events = EPOLLIN,
                             .data.u64 = (uint64_t)i | (uint64_t)s->gen << 32};
    if (epoll_ctl(self->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    s->fd = fd;
    s->reader = Py_NewRef(reader);
    self->live++;
    self->free_from = i + 1;
    return PyLong_FromUnsignedLongLong(handle_of(self, i));
}

PyDoc_STRVAR(Poller_set_pump_doc,
"set_pump(handle, pump) -> None\n\n"
"Hand the connection's reads to ``pump`` (a Pump) in C and send its requests on its\n"
"socket; None: back to the reader. A stale handle does nothing.");

static PyObject *
Poller_set_pump(Poller *self, PyObject *args)
{
    PyObject *arg, *pump;
    if (ready(self) < 0 || !PyArg_ParseTuple(args, "OO", &arg, &pump))
        return NULL;
    Py_ssize_t i = slot_arg(self, arg, 0);
    if (i < 0)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    Slot *s = &self->slots[i];
    if (pump == s->pump)
        Py_RETURN_NONE;
    if (pump != Py_None && pump_attach(pump, self, i) < 0)
        return NULL;
    if (s->pump != NULL)
        pump_detach(s->pump);
    Py_XSETREF(s->pump, pump == Py_None ? NULL : Py_NewRef(pump));
    Py_RETURN_NONE;
}

PyDoc_STRVAR(Poller_set_reader_doc,
"set_reader(handle, reader) -> None\n\nThe callable a read goes to while no pump is set.");

static PyObject *
Poller_set_reader(Poller *self, PyObject *args)
{
    PyObject *arg, *reader;
    if (ready(self) < 0 || !PyArg_ParseTuple(args, "OO", &arg, &reader))
        return NULL;
    Py_ssize_t i = slot_arg(self, arg, 0);
    if (i < 0)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    Py_XSETREF(self->slots[i].reader, Py_NewRef(reader));
    Py_RETURN_NONE;
}

PyDoc_STRVAR(Poller_write_doc,
"write(handle, data) -> None\n\n"
"Send ``data`` on the connection (what the socket does not take now goes when it can);\n"
"a failure ends the connection in the next poll(). A stale handle does nothing.");

static PyObject *
Poller_write(Poller *self, PyObject *args)
{
    PyObject *arg;
    Py_buffer data;
    if (ready(self) < 0 || !PyArg_ParseTuple(args, "Oy*", &arg, &data))
        return NULL;
    Py_ssize_t i = slot_arg(self, arg, 0);
    if (i >= 0)
        poller_send(self, i, data.buf, data.len);
    PyBuffer_Release(&data);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(Poller_close_doc,
"close(handle) -> None\n\n"
"Close the connection now, unsent bytes dropped; ``on_end`` is not called (the caller\n"
"knows). A stale handle does nothing.");

static PyObject *
Poller_close(Poller *self, PyObject *arg)
{
    if (ready(self) < 0)
        return NULL;
    Py_ssize_t i = slot_arg(self, arg, 0);
    if (i >= 0)
        release(self, i);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* Service the ``n`` events of the last epoll_wait: reads handed to their pumps or
 * readers, tails sent, then the ends that are due reported to ``on_end``; ``*woken`` set
 * when the wake fd was among them. -1 with a callback's exception (the sockets not
 * reached are reported again by the next epoll_wait: level-triggered). */
static int
service(Poller *self, int n, int *woken)
{
    self->polling = 1;
    int failed = 0;
    if (self->tick_fd >= 0) { /* first: how late the loop woke, before any socket's work */
        for (int k = 0; k < n && !failed; k++)
            if (self->events[k].data.u64 == TICK_HANDLE)
                failed = tick(self, clock_ns()) < 0;
    }
    Sched *q = &self->sched;
    if (q->active && !failed) { /* the schedule next: a due send waits for no read */
        int fired = 0;
        for (int k = 0; k < n; k++)
            fired |= self->events[k].data.u64 == TIMER_HANDLE;
        if (fired)
            sched_drain(q);
        if (fired || clock_ns() >= q->wake_ns)
            failed = sched_run(self) < 0;
    }
    for (int k = 0; k < n && !failed; k++) {
        uint64_t tag = self->events[k].data.u64;
        if (tag == TICK_HANDLE)
            continue;
        if (tag == WAKE_TAG) {
            *woken = 1;
            continue;
        }
        if (tag == TIMER_HANDLE) {
            if (!q->active && q->tfd >= 0)
                sched_drain(q);
            continue;
        }
        Py_ssize_t i = slot_of(self, self->events[k].data.u64);
        if (i < 0)
            continue;
        uint32_t events = self->events[k].events;
        if (events & EPOLLOUT)
            flush(self, i);
        if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            failed = service_read(self, i) < 0;
        /* Between ready sockets: a send that came due meanwhile goes now. */
        if (!failed && q->active && clock_ns() >= q->wake_ns)
            failed = sched_run(self) < 0;
    }
    /* The sends that failed (here, or in write() since the last poll). */
    for (Py_ssize_t i = 0; self->ends_due && !failed && i < self->n_slots; i++)
        if (self->slots[i].fd >= 0 && self->slots[i].err)
            failed = end(self, i, self->slots[i].err) < 0;
    if (!failed)
        self->ends_due = 0;
    self->polling = 0;
    return failed ? -1 : 0;
}

static int
not_polling(Poller *self, const char *what)
{
    if (self->polling) {
        PyErr_Format(PyExc_RuntimeError, "reentrant call to Poller.%s()", what);
        return -1;
    }
    return 0;
}

/* epoll_wait, again after a signal's EINTR; the GIL let go while it may block. */
static int
epoll_wait_for(Poller *self, int timeout_ms)
{
    int n;
    do {
        if (timeout_ms == 0)
            n = sys_epoll_wait(self->epfd, self->events, POLL_EVENTS, 0);
        else {
            Py_BEGIN_ALLOW_THREADS
            n = sys_epoll_wait(self->epfd, self->events, POLL_EVENTS, timeout_ms);
            Py_END_ALLOW_THREADS
        }
    } while (n < 0 && errno == EINTR && timeout_ms == 0);
    if (n < 0 && errno == EINTR)
        return 0; /* (a signal while waiting: back to Python, as a timeout) */
    if (n < 0)
        PyErr_SetFromErrno(PyExc_OSError);
    return n;
}

PyDoc_STRVAR(Poller_poll_doc,
"poll() -> int\n\n"
"Service every ready socket without waiting (epoll_wait, timeout 0): reads handed to\n"
"their pumps or readers, tails sent, ends reported to ``on_end``. The events handled.\n"
"A callback's exception stops it and is raised; the sockets not reached are reported\n"
"again by the next poll.");

static PyObject *
Poller_poll(Poller *self, PyObject *unused)
{
    if (ready(self) < 0 || not_polling(self, "poll") < 0)
        return NULL;
    int n = epoll_wait_for(self, 0), woken = 0;
    if (n < 0 || service(self, n, &woken) < 0)
        return NULL;
    return PyLong_FromLong(n);
}

/* Events, waiting up to ``wait_ms``: polled for up to ``spin_ns`` first, then slept for. */
static int
wait_events(Poller *self, int wait_ms)
{
    if (wait_ms != 0 && self->spin_ns > 0) {
        /* (never past the wait's own limit: the event loop's next timer) */
        long long spin = wait_ms > 0 && wait_ms * 1000000LL < self->spin_ns
                             ? wait_ms * 1000000LL
                             : self->spin_ns;
        long long until = clock_ns() + spin;
        do {
            int n = epoll_wait_for(self, 0);
            if (n != 0)
                return n;
        } while (clock_ns() < until);
    }
    return epoll_wait_for(self, wait_ms);
}

static long long
monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

PyDoc_STRVAR(Poller_wait_doc,
"wait(timeout_ms) -> int\n\n"
"Service ready sockets as poll() does, waiting in C for up to ``timeout_ms`` (-1: no\n"
"limit, 0: not at all) and servicing again, until the wake fd (wake_on) is readable,\n"
"a callback into Python was made (a refill, a cut, an end, a reader: what it scheduled\n"
"is asyncio's to run), or the time is up. The events handled. The event loop's selector\n"
"calls it (engine/loop.py ``PollerLoop``): between two of its timers no Python runs.");

static PyObject *
Poller_wait(Poller *self, PyObject *arg)
{
    long timeout_ms = PyLong_AsLong(arg);
    if (timeout_ms == -1 && PyErr_Occurred())
        return NULL;
    if (ready(self) < 0 || not_polling(self, "wait") < 0)
        return NULL;
    if (timeout_ms < -1 || timeout_ms > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "timeout_ms must be -1 or 0 to %d, not %ld", INT_MAX,
                     timeout_ms);
        return NULL;
    }
    long long deadline = timeout_ms > 0 ? monotonic_ms() + timeout_ms : 0;
    unsigned long long calls = pump_python_calls;
    int wait_ms = (int)timeout_ms, woken = 0;
    long total = 0;
    for (;;) {
        int n = wait_events(self, wait_ms);
        if (n < 0 || service(self, n, &woken) < 0)
            return NULL;
        total += n;
        if (n == 0 || woken || pump_python_calls != calls || timeout_ms == 0)
            break;
        if (timeout_ms > 0) {
            long long left = deadline - monotonic_ms();
            if (left <= 0)
                break;
            wait_ms = (int)left;
        }
    }
    return PyLong_FromLong(total);
}

PyDoc_STRVAR(Poller_wake_on_doc,
"wake_on(fd) -> None\n\n"
"wait() returns when ``fd`` is readable (the event loop's own selector's epoll fd);\n"
"-1: no fd (the one before is no longer watched).");

static PyObject *
Poller_wake_on(Poller *self, PyObject *arg)
{
    long fd = PyLong_AsLong(arg);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (ready(self) < 0)
        return NULL;
    if (fd < -1 || fd > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "not a file descriptor: %ld", fd);
        return NULL;
    }
    if (self->wake_fd >= 0 && epoll_ctl(self->epfd, EPOLL_CTL_DEL, self->wake_fd, NULL) < 0 &&
        errno != EBADF && errno != ENOENT)
        return PyErr_SetFromErrno(PyExc_OSError);
    self->wake_fd = -1;
    if (fd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = WAKE_TAG};
        if (epoll_ctl(self->epfd, EPOLL_CTL_ADD, (int)fd, &ev) < 0)
            return PyErr_SetFromErrno(PyExc_OSError);
        self->wake_fd = (int)fd;
    }
    Py_RETURN_NONE;
}

static PyObject *
Poller_fileno(Poller *self, PyObject *unused)
{
    if (ready(self) < 0)
        return NULL;
    return PyLong_FromLong(self->epfd);
}

PyDoc_STRVAR(Poller_shutdown_doc,
"shutdown() -> None\n\nClose every connection (no on_end) and the epoll fd.");

static PyObject *
Poller_shutdown(Poller *self, PyObject *unused)
{
    if (self->polling) {
        PyErr_SetString(PyExc_RuntimeError, "Poller.shutdown() from inside poll()");
        return NULL;
    }
    sched_clear(self);
    close_all(self);
    stop_ticks(self);
    if (self->epfd >= 0)
        close(self->epfd);
    self->epfd = self->wake_fd = -1;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(Poller_start_ticks_doc,
"start_ticks(tally, period_ns, sample_every) -> None\n\n"
"Tick every ``period_ns`` from now (a timerfd in the epoll set, read by poll()): each\n"
"poll that finds it expired records how late the loop woke for it into ``tally``'s\n"
"hiccups, and every ``sample_every``th tick samples the tally's requests in flight\n"
"(Tally.take_folded() hands both over). Again: the ticks start over, into ``tally``.");

static PyObject *
Poller_start_ticks(Poller *self, PyObject *args)
{
    PyObject *tally;
    long long period;
    int sample_every;
    if (ready(self) < 0 || !PyArg_ParseTuple(args, "OLi", &tally, &period, &sample_every))
        return NULL;
    if (period <= 0 || sample_every <= 0) {
        PyErr_SetString(PyExc_ValueError, "a tick's period and sampling are positive");
        return NULL;
    }
    if (!is_tally(tally)) {
        PyErr_SetString(PyExc_TypeError, "ticks are recorded into a Tally");
        return NULL;
    }
    stop_ticks(self);
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    long long first = clock_ns() + period;
    struct itimerspec spec = {
        .it_interval = {period / 1000000000LL, period % 1000000000LL},
        .it_value = {first / 1000000000LL, first % 1000000000LL},
    };
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TICK_HANDLE};
    if (timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, NULL) < 0 ||
        epoll_ctl(self->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        close(fd);
        return NULL;
    }
    self->tick_fd = fd;
    self->tick_tally = Py_NewRef(tally);
    self->tick_period = period;
    self->tick_next = first;
    self->ticks = 0;
    self->sample_every = sample_every;
    Py_RETURN_NONE;
}


PyDoc_STRVAR(Poller_schedule_doc,
"schedule(tally, lanes, feed, on_behind, on_stop, max_lag_ns, period_ns, tick_ns,\n"
"         per_lane=False) -> None\n\n"
"Run an open loop's schedule in poll() (engine/loop_dispatch.py): a timerfd in the set\n"
"wakes it for the next send; due requests go round robin to the ``lanes`` connections\n"
"(set with set_lane; none at first) with room below their pipeline, each lane's in one\n"
"write with its intended times. ``feed(first, count)`` gives the intended times of\n"
"requests first .. first + count - 1 (native int64 bytes; fewer: no more);\n"
"``on_behind(now, next)`` drops a backlog beyond ``max_lag_ns`` and returns (dropped,\n"
"stop): stop, send nothing now; ``on_stop(exc)`` hears that it stopped: None when the\n"
"tally stopped issuing or its budget is spent (or, per lane, every lane's feed ended),\n"
"else what failed. ``per_lane``: each lane its own times, in order: ``feed(lane, first,\n"
"count)`` (none: the lane has no more) and ``on_behind(lane, now, next)``, counted over\n"
"the lane's requests. The first dispatch is in the next poll().");

static PyObject *
Poller_schedule(Poller *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"tally", "lanes", "feed", "on_behind", "on_stop", "max_lag_ns",
                             "period_ns", "tick_ns", "per_lane", NULL};
    PyObject *tally, *feed, *on_behind, *on_stop;
    Py_ssize_t lanes;
    long long max_lag_ns, period_ns, tick_ns;
    int per_lane = 0;
    if (ready(self) < 0 ||
        !PyArg_ParseTupleAndKeywords(args, kwds, "OnOOOLLL|p", kwlist, &tally, &lanes, &feed,
                                     &on_behind, &on_stop, &max_lag_ns, &period_ns, &tick_ns,
                                     &per_lane) ||
        tally_check(tally) < 0)
        return NULL;
    Sched *q = &self->sched;
    if (q->dispatching || q->tfd >= 0) {
        PyErr_SetString(PyExc_RuntimeError, "the poller has a schedule already");
        return NULL;
    }
    if (lanes < 0 || period_ns <= 0 || tick_ns <= 0 || max_lag_ns < 0) {
        PyErr_SetString(PyExc_ValueError, "schedule(): lanes, max_lag_ns >= 0; periods > 0");
        return NULL;
    }
    size_t slots = (size_t)(lanes ? lanes : 1);
    q->lanes = PyMem_Calloc(slots, sizeof(Lane));
    q->heap = per_lane ? PyMem_Calloc(slots, sizeof(Py_ssize_t)) : NULL;
    q->due = per_lane ? PyMem_Calloc(slots, sizeof(Py_ssize_t)) : NULL;
    if (q->lanes == NULL || (per_lane && (q->heap == NULL || q->due == NULL))) {
        sched_clear(self);
        return PyErr_NoMemory();
    }
    q->n_lanes = lanes;
    q->per_lane = per_lane;
    q->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TIMER_HANDLE};
    if (q->tfd < 0 || epoll_ctl(self->epfd, EPOLL_CTL_ADD, q->tfd, &ev) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        sched_clear(self);
        return NULL;
    }
    q->tally = Py_NewRef(tally);
    q->feed = Py_NewRef(feed);
    q->on_behind = Py_NewRef(on_behind);
    q->on_stop = Py_NewRef(on_stop);
    q->max_lag_ns = max_lag_ns;
    q->period_ns = period_ns;
    q->tick_ns = tick_ns;
    q->next = 0;
    q->wake_ns = 0;
    q->active = 1;
    if (sched_arm(q, 1, 0) < 0) { /* at once */
        sched_clear(self);
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(Poller_set_lane_doc,
"set_lane(index, pump, pipeline) -> None\n\n"
"The schedule's connection ``index`` sends with ``pump`` (an open loop's Pump) up to\n"
"``pipeline`` requests in flight; None: it is down (skipped).");

static PyObject *
Poller_set_lane(Poller *self, PyObject *args)
{
    Py_ssize_t index, pipeline;
    PyObject *pump;
    if (!PyArg_ParseTuple(args, "nOn", &index, &pump, &pipeline))
        return NULL;
    Sched *q = &self->sched;
    if (q->lanes == NULL || index < 0 || index >= q->n_lanes) {
        PyErr_Format(PyExc_IndexError, "no lane %zd in the schedule", index);
        return NULL;
    }
    if (pump != Py_None && pump_check_scheduled(pump) < 0)
        return NULL;
    q->lanes[index].pipeline = pipeline;
    Py_XSETREF(q->lanes[index].pump, pump == Py_None ? NULL : Py_NewRef(pump));
    Py_RETURN_NONE;
}

PyDoc_STRVAR(Poller_scheduled_of_doc,
"scheduled_of(index) -> int\n\n"
"A schedule per lane: lane ``index``'s requests sent or dropped so far (``scheduled``\n"
"counts every lane's).");

static PyObject *
Poller_scheduled_of(Poller *self, PyObject *arg)
{
    Py_ssize_t index = PyLong_AsSsize_t(arg);
    if (index == -1 && PyErr_Occurred())
        return NULL;
    Sched *q = &self->sched;
    if (q->lanes == NULL || !q->per_lane || index < 0 || index >= q->n_lanes) {
        PyErr_Format(PyExc_IndexError, "no lane %zd with a schedule of its own", index);
        return NULL;
    }
    return PyLong_FromLongLong(q->lanes[index].own.next);
}

PyDoc_STRVAR(Poller_unschedule_doc,
"unschedule() -> None\n\nDrop the schedule (no on_stop); none: nothing to do.");

static PyObject *
Poller_unschedule(Poller *self, PyObject *unused)
{
    if (self->sched.dispatching) {
        PyErr_SetString(PyExc_RuntimeError, "Poller.unschedule() from inside a dispatch");
        return NULL;
    }
    sched_clear(self);
    Py_RETURN_NONE;
}

static PyObject *
Poller_scheduling(Poller *self, void *closure)
{
    return PyBool_FromLong(self->sched.active);
}

static PyObject *
Poller_stop_ticks(Poller *self, PyObject *unused)
{
    stop_ticks(self);
    Py_RETURN_NONE;
}

static PyMemberDef Poller_members[] = {
    {"live", T_PYSSIZET, offsetof(Poller, live), READONLY, "connections open"},
    {"ticks", T_LONGLONG, offsetof(Poller, ticks), READONLY, "ticks seen since start_ticks"},
    {"busy_poll_ns", T_LONGLONG, offsetof(Poller, spin_ns), 0,
     "wait() polls this long for events before it sleeps (0: it sleeps at once)"},
    {"scheduled", T_LONGLONG, offsetof(Poller, sched.next), READONLY,
     "the schedule's requests sent or dropped so far"},
    {NULL},
};

static PyGetSetDef Poller_getset[] = {
    {"scheduling", (getter)Poller_scheduling, NULL, "a schedule is running", NULL},
    {NULL},
};

PyDoc_STRVAR(Poller_overdue_doc,
"overdue(before_ns) -> list[int]\n\n"
"The handles of the connections that may have a request timed out: each one whose pump\n"
"has a request in flight sent at or before ``before_ns`` (now less the timeout), and each\n"
"in reader mode (its requests, if any, are Python's to check). The worker's timeout scan\n"
"(engine/worker.py) asks this once instead of every connection: at 10,000 connections\n"
"the Python scan stalled the loop 10 ms each second.");

static PyObject *
Poller_overdue(Poller *self, PyObject *arg)
{
    long long before = PyLong_AsLongLong(arg);
    if (before == -1 && PyErr_Occurred())
        return NULL;
    if (ready(self) < 0)
        return NULL;
    PyObject *handles = PyList_New(0);
    if (handles == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < self->n_slots; i++) {
        const Slot *s = &self->slots[i];
        long long sent;
        if (s->fd < 0)
            continue;
        if (s->pump != NULL ? !pump_oldest_sent(s->pump, &sent) || sent > before
                            : s->reader == NULL)
            continue;
        PyObject *handle = PyLong_FromUnsignedLongLong(handle_of(self, i));
        if (handle == NULL || PyList_Append(handles, handle) < 0) {
            Py_XDECREF(handle);
            Py_DECREF(handles);
            return NULL;
        }
        Py_DECREF(handle);
    }
    return handles;
}

static PyMethodDef Poller_methods[] = {
    {"add", (PyCFunction)Poller_add, METH_VARARGS, Poller_add_doc},
    {"set_pump", (PyCFunction)Poller_set_pump, METH_VARARGS, Poller_set_pump_doc},
    {"set_reader", (PyCFunction)Poller_set_reader, METH_VARARGS, Poller_set_reader_doc},
    {"write", (PyCFunction)Poller_write, METH_VARARGS, Poller_write_doc},
    {"close", (PyCFunction)Poller_close, METH_O, Poller_close_doc},
    {"poll", (PyCFunction)Poller_poll, METH_NOARGS, Poller_poll_doc},
    {"wait", (PyCFunction)Poller_wait, METH_O, Poller_wait_doc},
    {"wake_on", (PyCFunction)Poller_wake_on, METH_O, Poller_wake_on_doc},
    {"fileno", (PyCFunction)Poller_fileno, METH_NOARGS, PyDoc_STR("The epoll fd.")},
    {"shutdown", (PyCFunction)Poller_shutdown, METH_NOARGS, Poller_shutdown_doc},
    {"start_ticks", (PyCFunction)Poller_start_ticks, METH_VARARGS, Poller_start_ticks_doc},
    {"stop_ticks", (PyCFunction)Poller_stop_ticks, METH_NOARGS,
     PyDoc_STR("stop_ticks() -> None\n\nNo more ticks (none: nothing).")},
    {"schedule", (PyCFunction)(void (*)(void))Poller_schedule, METH_VARARGS | METH_KEYWORDS,
     Poller_schedule_doc},
    {"set_lane", (PyCFunction)Poller_set_lane, METH_VARARGS, Poller_set_lane_doc},
    {"scheduled_of", (PyCFunction)Poller_scheduled_of, METH_O, Poller_scheduled_of_doc},
    {"unschedule", (PyCFunction)Poller_unschedule, METH_NOARGS, Poller_unschedule_doc},
    {"overdue", (PyCFunction)Poller_overdue, METH_O, Poller_overdue_doc},
    {NULL},
};

static PyTypeObject PollerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kvbench.engine._pump.Poller",
    .tp_doc = PyDoc_STR("Poller(on_end=None): a worker's connections' sockets in an epoll set, "
                        "serviced in C by poll(); on_end(handle, errno) hears of an end."),
    .tp_basicsize = sizeof(Poller),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = Poller_new,
    .tp_init = (initproc)Poller_init,
    .tp_dealloc = (destructor)Poller_dealloc,
    .tp_traverse = (traverseproc)Poller_traverse,
    .tp_clear = (inquiry)Poller_clear,
    .tp_members = Poller_members,
    .tp_getset = Poller_getset,
    .tp_methods = Poller_methods,
};

int
loop_add_types(PyObject *module)
{
    if (PyType_Ready(&PollerType) < 0)
        return -1;
    Py_INCREF(&PollerType);
    if (PyModule_AddObject(module, "Poller", (PyObject *)&PollerType) < 0) {
        Py_DECREF(&PollerType);
        return -1;
    }
    /* (a lane's feed is asked for this many at a time: Python primes that many) */
    return PyModule_AddIntConstant(module, "LANE_FEED", LANE_FEED);
}
