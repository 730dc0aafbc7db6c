/* kvbench.engine._pump: the compiled hot path of one connection, closed and open loop.
 *
 * At pipeline 1 every op is one read, one write and one event-loop callback; the Python
 * driver spent about 5 us per op around them (parse, account, encode, FIFO), more than
 * the syscalls. This module does that work in C for memcached text, binary and meta and
 * for RESP2 and RESP3:
 *
 *   Pump.received(data)  one read: classify every complete reply (the Python codecs'
 *                        read_kinds codes, same values), account op / code / latency
 *                        into the shared Tally, then send as many new requests, drawn
 *                        from the server's Stream (the workload's chunks of op, key and
 *                        value) and encoded here, in one write.
 *   Pump.issue_scheduled(intended)
 *                        open loop: the dispatcher (engine/open_loop.py; on the compiled
 *                        event loop its schedule in C, _pump_loop.c, through
 *                        pump_send_scheduled) hands the pump the due times of the
 *                        requests it may send; they go out in one
 *                        write, each send's lag is recorded, and replies are accounted
 *                        from those times (coordinated omission) with their service time
 *                        beside; a reply sends nothing (the schedule does).
 *
 * Each protocol is a Wire (_pump.h): a reply scanner and a request encoder, in a file of
 * its own (_pump_text.c, _pump_resp.c, _pump_binary.c, _pump_meta.c), for the ops a
 * workload mix sends (get, set, delete, incr/decr, multi-get) and those a replay adds. The
 * Python codecs remain the reference: tests compare replies' codes and requests' bytes
 * with theirs. Binary and meta requests carry opaques: each pump numbers its own, as each
 * connection's codec does, and its FIFO keeps the one each reply must carry.
 *
 * A Stream's refill() hands it a chunk in one of two forms, told apart by the tuple's
 * length:
 *
 *   (ops, keys, values, start[, ttl])   lists, one Python object per op, key and value (a
 *                                       multi-get's key a tuple of keys): a workload's
 *                                       RequestSource, and a replay's lane on the list path.
 *   (ops, keys, key_starts, key_ends, values, value_starts, value_ends, start, ttl)
 *                                       a packed chunk: a replay's lane sends one cut from
 *                                       its spool (one segment per lane), a plain run's
 *                                       source one drawn as bounds into its key and value
 *                                       tables; no Python object per request. ops: n bytes
 *                                       (Op codes); keys: a blob, request i's key at
 *                                       [key_starts[i], key_ends[i]); values: a blob,
 *                                       request i's value at [value_starts[i],
 *                                       value_ends[i]) (stores only). The offsets are n
 *                                       native uint32 each (a numpy uint32 array,
 *                                       array('I'), or 4n bytes); ttl None: the stream's.
 *                                       No multi-gets.
 *
 * A packed chunk is checked whole when it is loaded (ops the wire encodes, keys non-empty
 * and inside the blob, value ranges inside theirs: a ValueError naming what is wrong, and
 * none of it sent) and its buffers are held until the next chunk; each request is then
 * resolved to pointers into them (Packed, packed_request) as a list's is from its objects
 * (listed_request), and the wire encodes that Request the same way.
 *
 * Sans-IO like the codecs: no sockets here; the transport's write is a callable.
 */
#include "_pump.h"
#include <stdarg.h>
#include <structmember.h>
#include <time.h>


static const Wire *const WIRES[P_COUNT] = {
    [P_TEXT] = &text_wire, [P_RESP2] = &resp2_wire, [P_BINARY] = &binary_wire,
    [P_META] = &meta_wire, [P_RESP3] = &resp3_wire, [P_HTTP] = &http_wire};

/* The wire of ``protocol``, or NULL with a ValueError. */
static const Wire *
wire_of(int protocol)
{
    if (protocol <= 0 || protocol >= P_COUNT) {
        PyErr_Format(PyExc_ValueError, "unknown protocol %d", protocol);
        return NULL;
    }
    return WIRES[protocol];
}

/* The pumps' clock, frozen at this value when >= 0 (_set_clock: tests that hold the two
 * drivers' histograms together on a schedule of their own). */
static long long frozen_ns = -1;

static long long
monotonic_ns(void)
{
    if (frozen_ns >= 0)
        return frozen_ns;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

unsigned long long pump_python_calls = 0;

/* -- failures ------------------------------------------------------------------------ */

Py_ssize_t
scan_fail(Scan *s, const char *message)
{
    s->error = message;
    return BAD;
}

/* The quoted bytes are the server's, so they are only escaped when the error is built
 * (scan_error), never decoded: this costs nothing until a reply is wrong. */
Py_ssize_t
scan_failf(Scan *s, const char *line, Py_ssize_t n, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    PyOS_vsnprintf(s->detail, sizeof s->detail, format, args);
    va_end(args);
    s->error = s->detail;
    if (line != NULL) {
        s->quote = line;
        s->quote_len = n < QUOTE_MAX ? n : QUOTE_MAX;
    }
    return BAD;
}

Py_ssize_t
scan_no_request(Scan *s)
{
    return scan_fail(s, "a reply arrived with no request pending");
}

/* The error text of a failed scan, built while the bytes it quotes are still there. The
 * message is ASCII; quoted reply bytes appear as a bytes repr (escaped, never decoded). */
static PyObject *
scan_error(const Scan *s)
{
    PyObject *message = PyUnicode_DecodeUTF8(s->error, (Py_ssize_t)strlen(s->error),
                                             "backslashreplace");
    if (message == NULL || s->quote == NULL)
        return message;
    PyObject *quoted = PyBytes_FromStringAndSize(s->quote, s->quote_len);
    if (quoted == NULL) {
        Py_DECREF(message);
        return NULL;
    }
    PyObject *text = PyUnicode_FromFormat("%U%R", message, quoted);
    Py_DECREF(message);
    Py_DECREF(quoted);
    return text;
}

/* A type's methods refuse to run before its __init__ did (tp_new leaves pointers NULL). */
static int
not_initialized(const char *type)
{
    PyErr_Format(PyExc_RuntimeError, "%s.__init__ was not called", type);
    return -1;
}

/* And its __init__ refuses to run again: a live stream's protocol and settings are its
 * pumps' too, a live pump's FIFO is what its requests in flight are checked against. */
static int
initialized_already(const char *type)
{
    PyErr_Format(PyExc_RuntimeError,
                 "%s.__init__ was called already: its settings are fixed (make a new %s)",
                 type, type);
    return -1;
}

/* A Pump or a Stream refuses a call that would change it from inside a call of its own
 * out to Python (a stream's refill, the transport's write): that call holds some of its
 * state in locals until it returns (CPython's buffered I/O refuses reentrant calls
 * alike). */
static int
reentrant(const char *call)
{
    PyErr_Format(PyExc_RuntimeError,
                 "reentrant call to %s (from inside a refill or write of the same pump or "
                 "stream)",
                 call);
    return -1;
}

/* -- scanning one reply ---------------------------------------------------------------- */

static Py_ssize_t
scan_reply(const Wire *wire, const char *p, Py_ssize_t n, const Head *head, long long max,
           Scan *s)
{
    if (head != NULL && head->family == F_NONE)
        return scan_fail(s, "no compiled scanner for this op");
    return wire->scan(p, n, head, max, s);
}

/* -- requests ------------------------------------------------------------------------ */

int
grow(void *pp, Py_ssize_t *cap, Py_ssize_t need, Py_ssize_t first, size_t item)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t n = *cap ? *cap : first;
    while (n < need)
        n *= 2;
    void *p = PyMem_Realloc(*(void **)pp, (size_t)n * item);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *(void **)pp = p;
    *cap = n;
    return 0;
}

int
out_reserve(Out *o, Py_ssize_t more)
{
    if (o->len + more <= o->cap) /* the common case, without a call */
        return 0;
    return grow(&o->p, &o->cap, o->len + more, 4096, 1);
}

/* A memoryview's buffer is read in place, without a view of its own: its caller uses the
 * bytes before any Python code can run (which could release it), and the memoryview,
 * held by the chunk, holds its exporter's buffer until it is released. One already
 * released holds nothing (its exporter's bytes may be freed): refused. */
int
view_of(PyObject *obj, const char **p, Py_ssize_t *n)
{
    if (PyBytes_Check(obj)) {
        *p = PyBytes_AS_STRING(obj);
        *n = PyBytes_GET_SIZE(obj);
        return 0;
    }
    if (PyMemoryView_Check(obj)) {
        if (((PyMemoryViewObject *)obj)->flags & _Py_MEMORYVIEW_RELEASED) {
            PyErr_SetString(PyExc_ValueError, "a key or value is a released memoryview");
            return -1;
        }
        Py_buffer *view = PyMemoryView_GET_BUFFER(obj);
        if (PyBuffer_IsContiguous(view, 'C') && view->itemsize == 1) {
            *p = view->buf;
            *n = view->len;
            return 0;
        }
    }
    if (PyByteArray_Check(obj)) {
        *p = PyByteArray_AS_STRING(obj);
        *n = PyByteArray_GET_SIZE(obj);
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "a key or value must be bytes-like, not %.50s",
                 Py_TYPE(obj)->tp_name);
    return -1;
}

int
multi_get_of(PyObject *keys, Py_ssize_t per_key, Out *o, PyObject ***items, Py_ssize_t *count)
{
    if (PyTuple_Check(keys)) {
        *items = &PyTuple_GET_ITEM(keys, 0);
        *count = PyTuple_GET_SIZE(keys);
    }
    else if (PyList_Check(keys)) {
        *items = &PyList_GET_ITEM(keys, 0);
        *count = PyList_GET_SIZE(keys);
    }
    else {
        PyErr_SetString(PyExc_TypeError, "a multi-get's keys must be a tuple or list");
        return -1;
    }
    Py_ssize_t total = FRAME_BYTES;
    for (Py_ssize_t i = 0; i < *count; i++) {
        const char *k;
        Py_ssize_t kn;
        if (view_of((*items)[i], &k, &kn) < 0)
            return -1;
        total += kn + per_key;
    }
    return out_reserve(o, total);
}

int
no_encoding(int op)
{
    PyErr_Format(PyExc_ValueError, "op %d has no compiled encoding", op);
    return -1;
}

/* Room in ``o`` for single-key request ``r`` of ``op`` (an rmw: its get and its set);
 * -1 with a MemoryError. */
static inline int
request_reserve(int op, const Request *r, Out *o)
{
    Py_ssize_t room = r->key_len + r->value_len + FRAME_BYTES;
    return out_reserve(o, op == OP_RMW ? room + r->key_len + FRAME_BYTES : room);
}

/* Append request ``r`` of ``op`` as ``wire`` writes it, room reserved (request_reserve);
 * an rmw as a get of its key, then a set of it (engine/rmw.py writes them so), the get's
 * tag in ``*get_tag`` (the set's in ``t->tag``); a command (a wire that sends them: text
 * and RESP) as its key, the request its template rendered. -1 with an exception: ``o``
 * and ``t`` may hold the get then, and the caller puts them back. */
static inline int
encode_request(const Wire *wire, const Encoding *e, int op, const Request *r, Tags *t, Out *o,
               uint32_t *get_tag)
{
    if (op == OP_COMMAND) {
        put(o, r->key, r->key_len);
        return 0;
    }
    if (op != OP_RMW)
        return wire->encode(e, op, r, t, o);
    Request get = *r;
    get.value = ""; /* (a get's encoder writes no value, but its size may count it) */
    get.value_len = 0;
    if (wire->encode(e, OP_GET, &get, t, o) < 0)
        return -1;
    *get_tag = t->tag;
    return wire->encode(e, OP_SET, r, t, o);
}

/* Request ``op`` of a list-form chunk (its key and value objects) resolved for ``wire``,
 * room reserved; -1 with an exception (a ValueError for an op the wire does not encode). */
static inline int
listed_request(const Wire *wire, long op, PyObject *key, PyObject *value, Out *o, Request *r)
{
    if (!wire_encodes(wire, op))
        return no_encoding((int)op);
    r->keys = NULL;
    if (op == OP_MGET) { /* its encoder reads and reserves for the keys */
        r->keys = key;
        return 0;
    }
    r->value = ""; /* none: nothing to put */
    r->value_len = 0;
    if (view_of(key, &r->key, &r->key_len) < 0 ||
        (op_has_value((int)op) && view_of(value, &r->value, &r->value_len) < 0))
        return -1;
    return request_reserve((int)op, r, o);
}

/* -- packed chunks ------------------------------------------------------------------- */

/* A packed chunk (a replay's lane sends them, cut from its spool; a plain run's source,
 * bounds into its tables): n requests as columns, no Python object per request. ``ops``:
 * n bytes, each an op; ``keys``: a blob holding request i's key at [key_starts[i],
 * key_ends[i]); ``values``: a blob holding request i's value at [value_starts[i],
 * value_ends[i]) (a store's; other ops' are not read). The offsets are native uint32. The buffers are held (their exporters
 * cannot resize them) from load until the next chunk, and every op and offset is checked
 * at load, once, with an error that says what is wrong. A held buffer can still be
 * written, though (a reused spool buffer, a bytearray): so each request's op and offsets
 * are compared again as it is resolved (a few integer comparisons, no Python call), and
 * one changed since the load is an error, never a read outside the buffers. */
/* A packed chunk's columns, and its tuple's items (the columns, start and ttl). */
#define PACKED_COLUMNS 7
#define PACKED_ITEMS (PACKED_COLUMNS + 2)

typedef struct {
    Py_buffer views[PACKED_COLUMNS]; /* ops, keys, key_starts, key_ends, values,
                                      * value_starts, value_ends */
    int held;                        /* how many of views[] are held, in that order */
    const unsigned char *ops;
    const char *keys, *key_starts, *key_ends, *values, *value_starts, *value_ends;
    Py_ssize_t size, keys_len, values_len;
} Packed;

static const char *const PACKED_NAMES[PACKED_COLUMNS] = {
    "ops", "keys", "key_starts", "key_ends", "values", "value_starts", "value_ends"};

static void
packed_release(Packed *k)
{
    for (int i = 0; i < k->held; i++)
        PyBuffer_Release(&k->views[i]);
    k->held = 0;
    k->size = 0;
}

static int
packed_traverse(Packed *k, visitproc visit, void *arg)
{
    for (int i = 0; i < k->held; i++)
        Py_VISIT(k->views[i].obj);
    return 0;
}

/* Element i of a uint32 column (memcpy: a bytes-like column may sit at any address). */
static inline uint32_t
u32_at(const char *column, Py_ssize_t i)
{
    uint32_t v;
    memcpy(&v, column + i * 4, 4);
    return v;
}

/* A column of native uint32: format I (or L of 4 bytes), or plain bytes (B) of 4 per item. */
static int
is_u32_column(const Py_buffer *view)
{
    const char *f = view->format != NULL ? view->format : "B";
    if (f[0] == '@' || f[0] == '=')
        f++;
    if (f[0] == '\0' || f[1] != '\0') /* one letter ("", "@" and "=" have none) */
        return 0;
    return (f[0] == 'B' && view->itemsize == 1) ||
           ((f[0] == 'I' || f[0] == 'L') && view->itemsize == 4);
}

static int
packed_fail(Packed *k, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    PyObject *text = PyUnicode_FromFormatV(format, args);
    va_end(args);
    if (text != NULL) {
        PyErr_Format(PyExc_ValueError, "packed chunk: %U", text);
        Py_DECREF(text);
    }
    packed_release(k);
    return -1;
}

/* Hold the buffers of a packed chunk's columns and check them all for ``wire``: every
 * op one the wire encodes (not a multi-get: its keys are a Python object) or one of the
 * ``templates`` command entries' codes (from COMMAND_BASE), every key
 * non-empty and inside ``keys``, every value range inside ``values``; 0, or -1 with a
 * ValueError (TypeError: a column is not a buffer) saying what is wrong, nothing held. */
static int
packed_load(Packed *k, PyObject *const columns[PACKED_COLUMNS], const Wire *wire,
            Py_ssize_t templates)
{
    k->held = 0;
    for (int i = 0; i < PACKED_COLUMNS; i++) {
        Py_buffer *view = &k->views[i];
        if (PyObject_GetBuffer(columns[i], view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
            PyErr_Format(PyExc_TypeError,
                         "packed chunk: %s must be a C-contiguous buffer, not %.50s",
                         PACKED_NAMES[i], Py_TYPE(columns[i])->tp_name);
            packed_release(k);
            return -1;
        }
        k->held++;
    }
    Py_buffer *v = k->views;
    static const int BYTES[] = {0, 1, 4}, OFFSETS[] = {2, 3, 5, 6};
    for (int j = 0; j < 3; j++) {
        int i = BYTES[j];
        if (v[i].itemsize != 1)
            return packed_fail(k, "%s must hold bytes (itemsize 1), not items of %zd bytes",
                               PACKED_NAMES[i], v[i].itemsize);
    }
    Py_ssize_t n = v[0].len;
    for (int j = 0; j < 4; j++) {
        int i = OFFSETS[j];
        if (!is_u32_column(&v[i]))
            return packed_fail(k, "%s must be native uint32 (format I), not format '%s' of "
                               "%zd-byte items", PACKED_NAMES[i],
                               v[i].format != NULL ? v[i].format : "B", v[i].itemsize);
        if (v[i].len != 4 * n)
            return packed_fail(k, "%s holds %zd bytes, not 4 per op (%zd ops: %zd bytes)",
                               PACKED_NAMES[i], v[i].len, n, 4 * n);
    }
    k->ops = v[0].buf;
    k->keys = v[1].buf;
    k->key_starts = v[2].buf;
    k->key_ends = v[3].buf;
    k->values = v[4].buf;
    k->value_starts = v[5].buf;
    k->value_ends = v[6].buf;
    k->size = n;
    Py_ssize_t keys_len = k->keys_len = v[1].len, values_len = k->values_len = v[4].len;
    for (Py_ssize_t i = 0; i < n; i++) {
        int op = k->ops[i];
        if (op >= MAX_OPS)
            return packed_fail(k, "op %d at %zd is not an op (at most %d)", op, i, MAX_OPS - 1);
        if (op == OP_MGET)
            return packed_fail(k, "op %d at %zd is a multi-get (list-form chunks only)", op, i);
        if (!wire_encodes(wire, op) && !(op >= COMMAND_BASE && op - COMMAND_BASE < templates))
            return packed_fail(k, "op %d at %zd has no compiled encoding", op, i);
        uint32_t start = u32_at(k->key_starts, i), end = u32_at(k->key_ends, i);
        if (start > end)
            return packed_fail(k, "key_starts[%zd] = %u is past key_ends[%zd] = %u", i, start,
                               i, end);
        if (end == start)
            return packed_fail(k, "key %zd is empty (key_starts[%zd] = key_ends[%zd] = %u)", i,
                               i, i, end);
        if (end > keys_len)
            return packed_fail(k, "key_ends[%zd] = %u is past the keys' %zd bytes", i, end,
                               keys_len);
        uint32_t from = u32_at(k->value_starts, i), to = u32_at(k->value_ends, i);
        if (from > to)
            return packed_fail(k, "value_starts[%zd] = %u is past value_ends[%zd] = %u", i,
                               from, i, to);
        if (to > values_len)
            return packed_fail(k, "value_ends[%zd] = %u is past the values' %zd bytes", i, to,
                               values_len);
    }
    return 0;
}

/* A packed chunk's column was written after its load checks: a ValueError; -1. */
static int
packed_changed(Py_ssize_t i)
{
    PyErr_Format(PyExc_ValueError,
                 "packed chunk: request %zd changed after the chunk was loaded (its columns "
                 "must not be written while a stream holds them)",
                 i);
    return -1;
}

/* Request ``i`` of ``op`` (ops[i]) of a loaded packed chunk, room reserved; -1 with an
 * exception (a column written since the load: the checks, again, in a few comparisons). */
static inline int
packed_request(const Packed *k, const Wire *wire, Py_ssize_t i, int op, Out *o, Request *r)
{
    uint32_t start = u32_at(k->key_starts, i), end = u32_at(k->key_ends, i);
    if (op == OP_MGET || !wire_encodes(wire, op) || end <= start || end > k->keys_len)
        return packed_changed(i);
    r->key = k->keys + start;
    r->key_len = (Py_ssize_t)(end - start);
    r->keys = NULL;
    if (op_has_value(op)) {
        uint32_t from = u32_at(k->value_starts, i), to = u32_at(k->value_ends, i);
        if (from > to || to > k->values_len)
            return packed_changed(i);
        r->value = k->values + from;
        r->value_len = (Py_ssize_t)(to - from);
    }
    else {
        r->value = "";
        r->value_len = 0;
    }
    return request_reserve(op, r, o);
}

/* Bring the line at ``p`` into the cache, a hint that never faults. On x86 the
 * instruction itself: gcc 12 removed __builtin_prefetch from packed_prefetch's caller at
 * -O2 (no prefetch in the object), though not an asm statement. */
static inline void
prefetch_read(const char *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetcht0 %0" : : "m"(*p));
#else
    __builtin_prefetch(p);
#endif
}

/* Request ``i``'s key and value (of a loaded packed chunk, ``i`` < its size) fetched
 * ahead of their copy into the request. Keys are drawn at random from a table larger
 * than the caches: at 100,000 keys the copy of each waited for memory, 2-3% of a
 * pipeline-1 run's client CPU by perf (0.7% at 1,000 keys), 0.4% once fetched ahead. A
 * bound past its table (written since the load) is left for packed_request to refuse.
 * A send of many requests fetches each PREFETCH_AHEAD requests before its copy (a read
 * fetches the first PREFETCH_AHEAD before its replies are scanned). */
#define PREFETCH_AHEAD 4

static inline void
packed_prefetch(const Packed *k, Py_ssize_t i)
{
    uint32_t start = u32_at(k->key_starts, i), from = u32_at(k->value_starts, i);
    if (start < k->keys_len)
        prefetch_read(k->keys + start);
    if (from < k->values_len)
        prefetch_read(k->values + from);
}

/* Whether ``wire`` can write requests with ``e``'s settings: a ttl of 0 or more seconds
 * and flags of 32 bits in every protocol, and what the wire's own check asks; -1 with a
 * ValueError. */
static int
encoding_check(const Wire *wire, const Encoding *e)
{
    if (e->ttl < 0) {
        PyErr_Format(PyExc_ValueError, "ttl %lld: a ttl is 0 (no expiry) or more seconds",
                     e->ttl);
        return -1;
    }
    if (e->flags < 0 || e->flags > 0xFFFFFFFFLL) {
        PyErr_Format(PyExc_ValueError, "flags %lld: flags are 0 to 4294967295", e->flags);
        return -1;
    }
    return wire->check != NULL ? wire->check(e) : 0;
}

/* ``e`` set to the settings given, all checked; -1 with an exception (``e`` as it was).
 * HTTP's target and tail are borrowed: the caller keeps them while ``e`` is used. */
static int
encoding_from(int protocol, long long ttl, long long flags, const char *target,
              Py_ssize_t target_len, const char *tail, Py_ssize_t tail_len, Encoding *e)
{
    const Wire *wire = wire_of(protocol);
    Encoding checked = {protocol, ttl, flags, target, tail, target_len, tail_len};
    if (wire == NULL || encoding_check(wire, &checked) < 0)
        return -1;
    *e = checked;
    return 0;
}

PyDoc_STRVAR(encode_doc,
"encode(protocol, ttl, flags, ops, keys, values, start, stop, opaque=0, target=b'',\n"
"       tail=b'') -> bytes\n\n"
"Requests ``start`` to ``stop`` as a Stream writes them, numbering opaques (binary, meta)\n"
"from ``opaque``; HTTP's with ``target`` and ``tail`` (as Stream's). For tests and\n"
"benchmarks.");

/* -- --command's templates, rendered in C ------------------------------------------------ */

/* The templates ``commands`` describes (NULL or None: none): a tuple of (record, pieces),
 * entry i's code COMMAND_BASE + i, ``record`` the code its requests are recorded under,
 * each piece bytes (a literal) or (kind, prefix, suffix), a PIECE_* kind and two bytes
 * (the key's; empty for the value's kinds). Borrows the bytes: the caller holds
 * ``commands`` (tuples: no piece can be replaced). 0, or -1 with an exception and nothing
 * allocated. */
static int
templates_load(PyObject *commands, Template **out, Py_ssize_t *count)
{
    *out = NULL;
    *count = 0;
    if (commands == NULL || commands == Py_None)
        return 0;
    if (!PyTuple_Check(commands) || PyTuple_GET_SIZE(commands) > MAX_OPS - COMMAND_BASE) {
        PyErr_Format(PyExc_ValueError, "commands is a tuple of at most %d (record, pieces)",
                     MAX_OPS - COMMAND_BASE);
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(commands);
    Template *t = PyMem_Calloc((size_t)(n ? n : 1), sizeof *t);
    if (t == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *entry = PyTuple_GET_ITEM(commands, i), *pieces;
        long record;
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2 ||
            !PyTuple_Check(pieces = PyTuple_GET_ITEM(entry, 1)) ||
            !PyLong_Check(PyTuple_GET_ITEM(entry, 0)) ||
            (record = PyLong_AsLong(PyTuple_GET_ITEM(entry, 0))) < COMMAND_BASE ||
            record >= MAX_OPS) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError,
                         "command %zd: expected (record, pieces), record a code from %d to %d "
                         "and pieces a tuple", i, COMMAND_BASE, MAX_OPS - 1);
            goto fail;
        }
        Py_ssize_t m = PyTuple_GET_SIZE(pieces);
        t[i].pieces = PyMem_Calloc((size_t)(m ? m : 1), sizeof(Piece));
        if (t[i].pieces == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        t[i].count = m;
        t[i].record = (int)record;
        for (Py_ssize_t j = 0; j < m; j++) {
            PyObject *item = PyTuple_GET_ITEM(pieces, j);
            Piece *piece = &t[i].pieces[j];
            if (PyBytes_Check(item)) {
                piece->kind = PIECE_LITERAL;
                piece->p = PyBytes_AS_STRING(item);
                piece->len = PyBytes_GET_SIZE(item);
                t[i].room += piece->len;
            }
            else if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 3 &&
                     PyLong_Check(PyTuple_GET_ITEM(item, 0)) &&
                     PyBytes_Check(PyTuple_GET_ITEM(item, 1)) &&
                     PyBytes_Check(PyTuple_GET_ITEM(item, 2))) {
                long kind = PyLong_AsLong(PyTuple_GET_ITEM(item, 0));
                if (kind <= PIECE_LITERAL || kind >= PIECE_KINDS) {
                    PyErr_Clear();
                    PyErr_Format(PyExc_ValueError, "command %zd, piece %zd: no kind %ld", i,
                                 j, kind);
                    goto fail;
                }
                piece->kind = (int)kind;
                piece->p = PyBytes_AS_STRING(PyTuple_GET_ITEM(item, 1));
                piece->len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(item, 1));
                piece->suffix = PyBytes_AS_STRING(PyTuple_GET_ITEM(item, 2));
                piece->suffix_len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(item, 2));
                /* its own bytes, and a bulk string's "$", 20 digits and two CRLFs */
                t[i].room += piece->len + piece->suffix_len;
                t[i].room += kind == PIECE_KEY_BULK || kind == PIECE_VALUE_BULK ? 25
                             : kind == PIECE_VALUE_SIZE                        ? 20
                                                                               : 0;
                t[i].keys += kind == PIECE_KEY_BULK || kind == PIECE_KEY;
                t[i].datas += kind == PIECE_VALUE_BULK || kind == PIECE_VALUE;
            }
            else {
                PyErr_Format(PyExc_TypeError,
                             "command %zd, piece %zd: bytes or (kind, prefix, suffix), not "
                             "%.50s", i, j, Py_TYPE(item)->tp_name);
                goto fail;
            }
        }
    }
    *out = t;
    *count = n;
    return 0;
fail:
    for (Py_ssize_t i = 0; i < n; i++)
        PyMem_Free(t[i].pieces);
    PyMem_Free(t);
    return -1;
}

/* Append ``t`` rendered with ``r``'s key and value, room reserved (template_room): the
 * bytes RespTemplate.render or TextTemplate.render writes. */
static void
template_render(const Template *t, const Request *r, Out *o)
{
    for (Py_ssize_t i = 0; i < t->count; i++) {
        const Piece *piece = &t->pieces[i];
        switch (piece->kind) {
        case PIECE_LITERAL:
            put(o, piece->p, piece->len);
            break;
        case PIECE_KEY_BULK:
        case PIECE_KEY: {
            int bulk = piece->kind == PIECE_KEY_BULK;
            if (bulk) {
                PUT_LITERAL(o, "$");
                put_ll(o, piece->len + r->key_len + piece->suffix_len);
                PUT_LITERAL(o, "\r\n");
            }
            put(o, piece->p, piece->len);
            put(o, r->key, r->key_len);
            put(o, piece->suffix, piece->suffix_len);
            if (bulk)
                PUT_LITERAL(o, "\r\n");
            break;
        }
        case PIECE_VALUE_BULK:
            put_bulk(o, r->value, r->value_len);
            break;
        case PIECE_VALUE_SIZE:
            put_ll(o, r->value_len);
            break;
        default: /* PIECE_VALUE */
            put(o, r->value, r->value_len);
        }
    }
}

static void
templates_free(Template *t, Py_ssize_t count)
{
    for (Py_ssize_t i = 0; t != NULL && i < count; i++)
        PyMem_Free(t[i].pieces);
    PyMem_Free(t);
}

/* Request ``i`` of a packed chunk whose op is a command entry's code, resolved (its key
 * and value, whatever the template writes of them) and room reserved for ``t``'s
 * rendering; -1 with an exception. */
static int
packed_command(const Packed *k, Py_ssize_t i, const Template *t, Out *o, Request *r)
{
    uint32_t start = u32_at(k->key_starts, i), end = u32_at(k->key_ends, i);
    uint32_t from = u32_at(k->value_starts, i), to = u32_at(k->value_ends, i);
    if (end <= start || end > k->keys_len || from > to || to > k->values_len)
        return packed_changed(i);
    r->key = k->keys + start;
    r->key_len = (Py_ssize_t)(end - start);
    r->value = k->values + from;
    r->value_len = (Py_ssize_t)(to - from);
    r->keys = NULL;
    return out_reserve(o, template_room(t, r));
}

static PyObject *
encode(PyObject *module, PyObject *args)
{
    int protocol;
    long long ttl, flags;
    PyObject *ops, *keys, *values;
    Py_ssize_t start, stop;
    unsigned int opaque = 0;
    const char *target = "", *tail = "";
    Py_ssize_t target_len = 0, tail_len = 0;
    Encoding e;
    if (!PyArg_ParseTuple(args, "iLLO!O!O!nn|Iy#y#", &protocol, &ttl, &flags, &PyList_Type,
                          &ops, &PyList_Type, &keys, &PyList_Type, &values, &start, &stop,
                          &opaque, &target, &target_len, &tail, &tail_len) ||
        encoding_from(protocol, ttl, flags, target, target_len, tail, tail_len, &e) < 0)
        return NULL;
    if (start < 0 || stop > PyList_GET_SIZE(ops) || stop > PyList_GET_SIZE(keys) ||
        stop > PyList_GET_SIZE(values)) {
        PyErr_SetString(PyExc_IndexError, "start/stop outside the lists");
        return NULL;
    }
    const Wire *wire = WIRES[protocol];
    Out o = {NULL, 0, 0};
    Tags tags = {opaque, 0, 0};
    uint32_t get_tag;
    for (Py_ssize_t i = start; i < stop; i++) {
        long op = PyLong_AsLong(PyList_GET_ITEM(ops, i));
        Request r;
        if ((op == -1 && PyErr_Occurred()) ||
            listed_request(wire, op, PyList_GET_ITEM(keys, i), PyList_GET_ITEM(values, i), &o,
                           &r) < 0 ||
            encode_request(wire, &e, (int)op, &r, &tags, &o, &get_tag) < 0) {
            PyMem_Free(o.p);
            return NULL;
        }
    }
    PyObject *out = PyBytes_FromStringAndSize(o.p ? o.p : "", o.len);
    PyMem_Free(o.p);
    return out;
}

PyDoc_STRVAR(encode_packed_doc,
"encode_packed(protocol, ttl, flags, ops, keys, key_starts, key_ends, values, value_starts,\n"
"              value_ends, start, stop, opaque=0, target=b'', tail=b'', commands=None)\n"
"              -> bytes\n\n"
"encode() for a packed chunk's columns (checked as a Stream checks them when it loads\n"
"one: a ValueError says what is wrong): requests ``start`` to ``stop`` as a Stream\n"
"writes them, a command entry's code rendered from its template in ``commands`` (a\n"
"Stream's) (for tests and benchmarks).");

static PyObject *
encode_packed(PyObject *module, PyObject *args)
{
    int protocol;
    long long ttl, flags;
    PyObject *columns[PACKED_COLUMNS], *commands = NULL;
    Py_ssize_t start, stop;
    unsigned int opaque = 0;
    const char *target = "", *tail = "";
    Py_ssize_t target_len = 0, tail_len = 0;
    Encoding e;
    if (!PyArg_ParseTuple(args, "iLLOOOOOOOnn|Iy#y#O", &protocol, &ttl, &flags, &columns[0],
                          &columns[1], &columns[2], &columns[3], &columns[4], &columns[5],
                          &columns[6], &start, &stop, &opaque, &target, &target_len, &tail,
                          &tail_len, &commands) ||
        encoding_from(protocol, ttl, flags, target, target_len, tail, tail_len, &e) < 0)
        return NULL;
    const Wire *wire = WIRES[protocol];
    Template *templates;
    Py_ssize_t count;
    if (templates_load(commands, &templates, &count) < 0)
        return NULL;
    if (count && !wire_encodes(wire, OP_COMMAND)) {
        templates_free(templates, count);
        PyErr_Format(PyExc_ValueError, "protocol %d renders no command templates", protocol);
        return NULL;
    }
    Packed k;
    if (packed_load(&k, columns, wire, count) < 0) {
        templates_free(templates, count);
        return NULL;
    }
    Out o = {NULL, 0, 0};
    Tags tags = {opaque, 0, 0};
    uint32_t get_tag;
    PyObject *out = NULL;
    if (start < 0 || start > stop || stop > k.size) {
        PyErr_SetString(PyExc_IndexError, "start/stop outside the chunk");
        goto done;
    }
    for (Py_ssize_t i = start; i < stop; i++) {
        Request r;
        int op = k.ops[i];
        if (op >= COMMAND_BASE && op - COMMAND_BASE < count) {
            const Template *t = &templates[op - COMMAND_BASE];
            if (packed_command(&k, i, t, &o, &r) < 0)
                goto done;
            template_render(t, &r, &o);
        }
        else if (packed_request(&k, wire, i, op, &o, &r) < 0 ||
                 encode_request(wire, &e, op, &r, &tags, &o, &get_tag) < 0)
            goto done;
    }
    out = PyBytes_FromStringAndSize(o.p ? o.p : "", o.len);
done:
    PyMem_Free(o.p);
    packed_release(&k);
    templates_free(templates, count);
    return out;
}

/* -- growable int64 buffers ----------------------------------------------------------- */

typedef struct {
    long long *v;
    Py_ssize_t len, cap;
} I64s;

static int
i64s_reserve(I64s *b, Py_ssize_t more)
{
    if (b->len + more <= b->cap) /* the common case, without a call */
        return 0;
    return grow(&b->v, &b->cap, b->len + more, 4096, sizeof(long long));
}

/* The buffer's contents as bytes; the buffer is emptied. */
static PyObject *
i64s_take(I64s *b)
{
    PyObject *out = PyBytes_FromStringAndSize((const char *)b->v,
                                              b->len * (Py_ssize_t)sizeof(long long));
    if (out != NULL)
        b->len = 0;
    return out;
}

/* -- HDR histograms (Histogram's layout: _pump.h) ---------------------------------------- */

int
hdr_ready(Hdr *h)
{
    if (h->counts != NULL)
        return 0;
    h->counts = PyMem_Calloc(HDR_COUNTS_LEN, sizeof(long long));
    if (h->counts == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

void
hdr_free(Hdr *h)
{
    PyMem_Free(h->counts);
    *h = (Hdr){0};
}

/* The histogram's non-empty buckets and scalars, (indexes, counts, total, min, max, sum,
 * out_of_range) with indexes and counts native int64 bytes, ascending; None when it is
 * empty. Emptied: the buckets read are zeroed in place, so the counters stay allocated
 * for the next interval. One pass in C over the counters: handing them over whole cost
 * the interval's cut a numpy ``nonzero`` per histogram, a cut stalled the loop ~1.7 ms,
 * and an open loop sent what fell due meanwhile late. The pass reads only the blocks of
 * 64 counters a value went into (Hdr.used), not all 27,648 of each histogram. */
PyObject *
hdr_take(Hdr *h)
{
    if (h->total == 0)
        Py_RETURN_NONE;
    Py_ssize_t used = 0;
    for (int w = 0; w < HDR_BLOCK_WORDS; w++)
        for (uint64_t bits = h->used[w]; bits; bits &= bits - 1) {
            const long long *block = h->counts + (((Py_ssize_t)w * 64 + __builtin_ctzll(bits))
                                                  << HDR_BLOCK_SHIFT);
            for (int i = 0; i < 1 << HDR_BLOCK_SHIFT; i++)
                used += block[i] != 0;
        }
    PyObject *indexes = PyBytes_FromStringAndSize(NULL, used * (Py_ssize_t)sizeof(long long));
    PyObject *counts = PyBytes_FromStringAndSize(NULL, used * (Py_ssize_t)sizeof(long long));
    if (indexes == NULL || counts == NULL) {
        Py_XDECREF(indexes);
        Py_XDECREF(counts);
        return NULL;
    }
    long long *at = (long long *)PyBytes_AS_STRING(indexes);
    long long *n = (long long *)PyBytes_AS_STRING(counts);
    Py_ssize_t k = 0;
    for (int w = 0; w < HDR_BLOCK_WORDS; w++) /* (ascending: words, then their bits) */
        for (uint64_t bits = h->used[w]; bits; bits &= bits - 1) {
            Py_ssize_t first = ((Py_ssize_t)w * 64 + __builtin_ctzll(bits)) << HDR_BLOCK_SHIFT;
            for (Py_ssize_t i = first; i < first + (1 << HDR_BLOCK_SHIFT); i++)
                if (h->counts[i] != 0) {
                    at[k] = i;
                    n[k++] = h->counts[i];
                    h->counts[i] = 0;
                }
        }
    PyObject *out = Py_BuildValue("(NNLLLLL)", indexes, counts, h->total, h->min, h->max,
                                  h->sum, h->out_of_range);
    long long *kept = h->counts;
    *h = (Hdr){0};
    h->counts = kept;
    return out;
}

/* -- Tally: one worker's shared counters and reply buffers ------------------------------ */

/* Reply kinds a folding tally keeps apart: the code's low byte (KIND_MASK). */
#define FOLD_KINDS 256
/* The 64-bit words of a bit per (op, kind) pair. */
#define PAIR_WORDS (MAX_OPS * FOLD_KINDS / 64)

typedef struct {
    PyObject_HEAD
    char issuing; /* T_BOOL reads and writes a char */
    long long budget; /* requests left to send; -1: no limit */
    long long next_cut_ns;
    long long bytes_in;
    long long bytes_out;
    PyObject *on_cut; /* called with ``now`` when a read arrives past next_cut_ns */
    I64s ops, codes, latency;
    /* Open loop: each reply's service time (from the actual send; its latency is from the
     * intended time), each send's lag behind its slot, the late sends by op, the sends. */
    I64s service, lag;
    long long late[MAX_OPS];
    long long sent;
    /* Requests in flight on every pump of this tally (their FIFOs' lengths added up):
     * the worker samples it for Little's law, where summing the pumps' ``inflight`` in
     * Python cost 10,000 calls a sample at 10,000 connections. */
    long long inflight;
    /* Bytes by op: of the requests written, of the replies accounted (take_bytes()). */
    long long tx[MAX_OPS], rx[MAX_OPS];
    /* A folding tally (fold=True) records each read's replies into histograms here, at
     * the end of the read (the buffers above hold one read's replies until then, so that
     * a read that breaks the protocol takes them back as before), and each send's lag:
     * latency and the keys the replies returned by op and reply kind, service time by op.
     * take_folded() hands them over at the interval's cut: no per-reply buffer for
     * Python to fold (numpy's fold cost ~23 ns a reply, ~9% of a worker at pipeline 16). */
    int fold;
    long long folded;  /* replies folded since the last take_folded() */
    Hdr *latency_by;   /* [MAX_OPS * FOLD_KINDS] */
    long long *hits_by; /* [MAX_OPS * FOLD_KINDS] */
    /* The pairs folded into since the last take_folded(), a bit each: it visits those
     * only, where every cut looked at all 16,384 pairs' histograms. */
    uint64_t pairs_used[PAIR_WORDS];
    Hdr service_by[MAX_OPS];
    Hdr lag_hdr;
    /* The event loop's ticks (Poller.tick): how late each woke, and the requests in
     * flight sampled every few ticks (folding or not). */
    Hdr hiccups;
    long long inflight_sum, inflight_samples;
    /* --verify: get hits checked, those whose value was not ours, and the keys of the
     * first few of those (a list of bytes; NULL: none yet) since take_verified(). */
    long long verified, mismatches;
    PyObject *mismatch_keys;
    /* The first error reply accounted since take_said(): (op, its words), NULL: none. */
    PyObject *said;
} Tally;

static int
Tally_init(Tally *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"on_cut", "fold", NULL};
    PyObject *on_cut = Py_None;
    int fold = 0;
    if (self->on_cut != NULL) /* (its pumps hold it: its mode and buffers are theirs) */
        return initialized_already("Tally");
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|Op", kwlist, &on_cut, &fold))
        return -1;
    if (fold) {
        self->latency_by = PyMem_Calloc(MAX_OPS * FOLD_KINDS, sizeof(Hdr));
        self->hits_by = PyMem_Calloc(MAX_OPS * FOLD_KINDS, sizeof(long long));
        if (self->latency_by == NULL || self->hits_by == NULL) {
            PyMem_Free(self->latency_by);
            PyMem_Free(self->hits_by);
            self->latency_by = NULL;
            self->hits_by = NULL;
            PyErr_NoMemory();
            return -1;
        }
    }
    self->fold = fold;
    Py_INCREF(on_cut);
    Py_XSETREF(self->on_cut, on_cut);
    self->budget = -1;
    self->next_cut_ns = LLONG_MAX;
    return 0;
}

/* Fold the replies in the buffers (one read's) into the histograms and empty the
 * buffers; -1 with a MemoryError (the replies not folded stay in the buffers). */
static int
tally_fold(Tally *tally)
{
    Py_ssize_t n = tally->ops.len, i = 0;
    int service = tally->service.len == n;
    for (; i < n; i++) {
        long long op = tally->ops.v[i], code = tally->codes.v[i];
        Py_ssize_t pair = (Py_ssize_t)op * FOLD_KINDS + (code & (FOLD_KINDS - 1));
        Hdr *h = &tally->latency_by[pair];
        Hdr *s = service ? &tally->service_by[op] : NULL;
        if ((h->counts == NULL && hdr_ready(h) < 0) ||
            (s != NULL && s->counts == NULL && hdr_ready(s) < 0))
            break;
        hdr_add(h, tally->latency.v[i]);
        tally->pairs_used[pair >> 6] |= 1ULL << (pair & 63);
        if (s != NULL)
            hdr_add(s, tally->service.v[i]);
        tally->hits_by[pair] += code >> KEYS_SHIFT;
    }
    tally->folded += i;
    I64s *buffers[] = {&tally->ops, &tally->codes, &tally->latency, &tally->service};
    for (int b = 0; b < 4; b++) {
        I64s *buffer = buffers[b];
        if (b == 3 && !service)
            continue;
        if (i < buffer->len)
            memmove(buffer->v, buffer->v + i, (size_t)(buffer->len - i) * sizeof(long long));
        buffer->len -= i;
    }
    return i == n ? 0 : -1;
}

static PyTypeObject TallyType;

int
is_tally(PyObject *object)
{
    return PyObject_TypeCheck(object, &TallyType);
}

int
tally_tick(PyObject *object, long long late_ns, int sample)
{
    if (!is_tally(object)) {
        PyErr_SetString(PyExc_TypeError, "ticks are recorded into a Tally");
        return -1;
    }
    Tally *tally = (Tally *)object;
    if (sample) {
        tally->inflight_sum += tally->inflight;
        tally->inflight_samples++;
    }
    return hdr_record(&tally->hiccups, late_ns);
}

static int
Tally_traverse(Tally *self, visitproc visit, void *arg)
{
    Py_VISIT(self->on_cut);
    Py_VISIT(self->mismatch_keys);
    Py_VISIT(self->said);
    return 0;
}

static int
Tally_clear(Tally *self)
{
    Py_CLEAR(self->on_cut);
    Py_CLEAR(self->mismatch_keys);
    Py_CLEAR(self->said);
    return 0;
}

static void
Tally_dealloc(Tally *self)
{
    PyObject_GC_UnTrack(self);
    Tally_clear(self);
    PyMem_Free(self->ops.v);
    PyMem_Free(self->codes.v);
    PyMem_Free(self->latency.v);
    PyMem_Free(self->service.v);
    PyMem_Free(self->lag.v);
    if (self->latency_by != NULL)
        for (Py_ssize_t i = 0; i < MAX_OPS * FOLD_KINDS; i++)
            hdr_free(&self->latency_by[i]);
    PyMem_Free(self->latency_by);
    PyMem_Free(self->hits_by);
    for (int op = 0; op < MAX_OPS; op++)
        hdr_free(&self->service_by[op]);
    hdr_free(&self->lag_hdr);
    hdr_free(&self->hiccups);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(Tally_take_doc,
"take() -> (ops, codes, latency_ns)\n\n"
"The replies accounted since the last take, as native int64 bytes each (the recorder's\n"
"reply_ops, reply_codes and reply_latency_ns layout); the buffers are emptied.");

static PyObject *
Tally_take(Tally *self, PyObject *unused)
{
    if (self->on_cut == NULL) {
        not_initialized("Tally");
        return NULL;
    }
    PyObject *ops = i64s_take(&self->ops);
    PyObject *codes = ops ? i64s_take(&self->codes) : NULL;
    PyObject *latency = codes ? i64s_take(&self->latency) : NULL;
    if (latency == NULL) {
        Py_XDECREF(ops);
        Py_XDECREF(codes);
        return NULL;
    }
    return Py_BuildValue("(NNN)", ops, codes, latency);
}

PyDoc_STRVAR(Tally_take_open_doc,
"take_open() -> (service_ns, lag_ns, late, sent)\n\n"
"The open loop's figures since the last take: the replies' service times (in the order\n"
"of take()'s replies) and the sends' lags, as native int64 bytes; the late sends by op\n"
"(int64 bytes, MAX_OPS of them); the number of requests sent. Everything is emptied.");

static PyObject *
Tally_take_open(Tally *self, PyObject *unused)
{
    if (self->on_cut == NULL) {
        not_initialized("Tally");
        return NULL;
    }
    PyObject *service = i64s_take(&self->service);
    PyObject *lag = service ? i64s_take(&self->lag) : NULL;
    PyObject *late = lag ? PyBytes_FromStringAndSize((const char *)self->late,
                                                     (Py_ssize_t)sizeof self->late)
                         : NULL;
    if (late == NULL) {
        Py_XDECREF(service);
        Py_XDECREF(lag);
        return NULL;
    }
    memset(self->late, 0, sizeof self->late);
    long long sent = self->sent;
    self->sent = 0;
    return Py_BuildValue("(NNNL)", service, lag, late, sent);
}

PyDoc_STRVAR(Tally_take_bytes_doc,
"take_bytes() -> (tx, rx)\n\n"
"The bytes by op since the last take (int64 bytes, MAX_OPS of them each): of the requests\n"
"written (tx: their share of bytes_out) and of the replies accounted (rx: of bytes_in, less\n"
"what belongs to no reply accounted yet: a reply cut by the read, a broken read). Emptied.");

static PyObject *
Tally_take_bytes(Tally *self, PyObject *unused)
{
    if (self->on_cut == NULL) {
        not_initialized("Tally");
        return NULL;
    }
    PyObject *tx = PyBytes_FromStringAndSize((const char *)self->tx, (Py_ssize_t)sizeof self->tx);
    PyObject *rx = tx ? PyBytes_FromStringAndSize((const char *)self->rx,
                                                  (Py_ssize_t)sizeof self->rx)
                      : NULL;
    if (rx == NULL) {
        Py_XDECREF(tx);
        return NULL;
    }
    memset(self->tx, 0, sizeof self->tx);
    memset(self->rx, 0, sizeof self->rx);
    return Py_BuildValue("(NN)", tx, rx);
}

PyDoc_STRVAR(Tally_take_verified_doc,
"take_verified() -> (verified, mismatches, keys)\n\n"
"--verify's checks since the last take: the get hits whose value was checked, those whose\n"
"value kvbench did not write for their key, and the keys of those (bytes, distinct, the\n"
"first ten found). Emptied.");

static PyObject *
Tally_take_verified(Tally *self, PyObject *unused)
{
    PyObject *keys = self->mismatch_keys != NULL ? self->mismatch_keys : PyList_New(0);
    if (keys == NULL)
        return NULL;
    self->mismatch_keys = NULL;
    PyObject *result = Py_BuildValue("(LLN)", self->verified, self->mismatches, keys);
    if (result != NULL)
        self->verified = self->mismatches = 0;
    return result;
}

PyDoc_STRVAR(Tally_take_said_doc,
"take_said() -> (op, words) or None\n\n"
"The first error reply the pumps accounted since the last take: its request's op and the\n"
"server's words (bytes: a text line, RESP's without its '-'; an HTTP response's status\n"
"line; a memcached binary response's value), at most 160 bytes. Emptied.");

static PyObject *
Tally_take_said(Tally *self, PyObject *unused)
{
    PyObject *said = self->said != NULL ? self->said : Py_NewRef(Py_None);
    self->said = NULL;
    return said;
}

/* Keep the words of the error reply at p[0:n] on ``tally`` (see take_said), as (op,
 * bytes); none if they cannot be had. Out of the read loop's way: it runs once an
 * interval at most. */
static PyObject *said_of(int op, const char *p, Py_ssize_t n);

static void __attribute__((cold, noinline))
keep_said(Tally *tally, int op, const char *p, Py_ssize_t n)
{
    if ((tally->said = said_of(op, p, n)) == NULL)
        PyErr_Clear(); /* (a sample of the server's words: none this time) */
}

static PyObject *
said_of(int op, const char *p, Py_ssize_t n)
{
    const char *text = p;
    Py_ssize_t len = n;
    if (n >= 24 && (unsigned char)p[0] == 0x81) { /* memcached binary: its value */
        const unsigned char *h = (const unsigned char *)p;
        Py_ssize_t key = (Py_ssize_t)h[2] << 8 | h[3], extras = h[4];
        Py_ssize_t body = (Py_ssize_t)h[8] << 24 | (Py_ssize_t)h[9] << 16 |
                          (Py_ssize_t)h[10] << 8 | h[11];
        Py_ssize_t end = 24 + body < n ? 24 + body : n;
        Py_ssize_t at = 24 + extras + key < end ? 24 + extras + key : end;
        text = p + at;
        len = end - at;
    } else {
        if (len && text[0] == '-') { /* RESP's error marker */
            text++;
            len--;
        }
        const char *eol = memchr(text, '\n', (size_t)len);
        if (eol != NULL)
            len = eol - text;
        if (len && text[len - 1] == '\r')
            len--;
    }
    return Py_BuildValue("(iy#)", op, text, len < 160 ? len : (Py_ssize_t)160);
}

PyDoc_STRVAR(Tally_take_folded_doc,
"take_folded() -> (replies, service, lag, hiccups, inflight_sum, inflight_samples)\n\n"
"What a folding tally (fold=True) recorded since the last take, in Histogram's layout:\n"
"``replies`` a list of (op, kind, hits, histogram), one per op and reply kind answered\n"
"(hits: the keys those replies returned); ``service`` a list of (op, histogram) (an open\n"
"loop's service times); ``lag`` the open loop's sends' lags (a histogram or None); then the\n"
"ticks' (Poller.tick), folding or not: ``hiccups`` (a histogram or None) and the requests\n"
"in flight summed over ``inflight_samples`` samples. A histogram is (indexes, counts,\n"
"total, min, max, sum, out_of_range): its non-empty buckets, native int64 bytes, indexes\n"
"ascending. Emptied.");

static PyObject *
Tally_take_folded(Tally *self, PyObject *unused)
{
    if (self->on_cut == NULL) {
        not_initialized("Tally");
        return NULL;
    }
    PyObject *replies = PyList_New(0), *service = PyList_New(0), *lag = NULL, *hiccups = NULL;
    if (replies == NULL || service == NULL)
        goto error;
    for (Py_ssize_t w = 0; self->latency_by != NULL && w < PAIR_WORDS; w++) {
        for (uint64_t bits = self->pairs_used[w]; bits; bits &= bits - 1) {
            Py_ssize_t pair = w * 64 + __builtin_ctzll(bits); /* (ascending) */
            long long hits = self->hits_by[pair];
            PyObject *hist = hdr_take(&self->latency_by[pair]);
            PyObject *item = hist ? Py_BuildValue("(nnLN)", pair / FOLD_KINDS,
                                                  pair % FOLD_KINDS, hits, hist)
                                  : NULL;
            if (item == NULL || PyList_Append(replies, item) < 0) {
                Py_XDECREF(item);
                goto error;
            }
            Py_DECREF(item);
            self->hits_by[pair] = 0;
            self->pairs_used[w] &= ~(1ULL << (pair & 63));
        }
    }
    for (int op = 0; op < MAX_OPS; op++) {
        if (self->service_by[op].total == 0)
            continue;
        PyObject *hist = hdr_take(&self->service_by[op]);
        PyObject *item = hist ? Py_BuildValue("(iN)", op, hist) : NULL;
        if (item == NULL || PyList_Append(service, item) < 0) {
            Py_XDECREF(item);
            goto error;
        }
        Py_DECREF(item);
    }
    lag = hdr_take(&self->lag_hdr);
    hiccups = lag ? hdr_take(&self->hiccups) : NULL;
    if (hiccups == NULL)
        goto error;
    self->folded = 0;
    long long inflight_sum = self->inflight_sum, samples = self->inflight_samples;
    self->inflight_sum = self->inflight_samples = 0;
    return Py_BuildValue("(NNNNLL)", replies, service, lag, hiccups, inflight_sum, samples);
error:
    Py_XDECREF(replies);
    Py_XDECREF(service);
    Py_XDECREF(lag);
    return NULL;
}

static PyObject *
Tally_pending(Tally *self, void *closure)
{
    return PyLong_FromLongLong(self->ops.len + self->folded);
}

static PyObject *
Tally_fold_get(Tally *self, void *closure)
{
    return PyBool_FromLong(self->fold);
}

static PyMemberDef Tally_members[] = {
    {"issuing", T_BOOL, offsetof(Tally, issuing), 0, "send new requests"},
    {"budget", T_LONGLONG, offsetof(Tally, budget), 0, "requests left to send; -1: no limit"},
    {"next_cut_ns", T_LONGLONG, offsetof(Tally, next_cut_ns), 0, "when the interval ends"},
    {"bytes_in", T_LONGLONG, offsetof(Tally, bytes_in), 0, "bytes read"},
    {"bytes_out", T_LONGLONG, offsetof(Tally, bytes_out), 0, "bytes written"},
    {"inflight", T_LONGLONG, offsetof(Tally, inflight), READONLY,
     "requests in flight on its pumps"},
    {NULL},
};

static PyGetSetDef Tally_getset[] = {
    {"pending", (getter)Tally_pending, NULL,
     "replies accounted and not taken yet (buffered, or folded: take_folded)", NULL},
    {"fold", (getter)Tally_fold_get, NULL, "replies go into histograms (take_folded)", NULL},
    {NULL},
};

static PyMethodDef Tally_methods[] = {
    {"take", (PyCFunction)Tally_take, METH_NOARGS, Tally_take_doc},
    {"take_open", (PyCFunction)Tally_take_open, METH_NOARGS, Tally_take_open_doc},
    {"take_bytes", (PyCFunction)Tally_take_bytes, METH_NOARGS, Tally_take_bytes_doc},
    {"take_folded", (PyCFunction)Tally_take_folded, METH_NOARGS, Tally_take_folded_doc},
    {"take_verified", (PyCFunction)Tally_take_verified, METH_NOARGS, Tally_take_verified_doc},
    {"take_said", (PyCFunction)Tally_take_said, METH_NOARGS, Tally_take_said_doc},
    {NULL},
};

static PyTypeObject TallyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kvbench.engine._pump.Tally",
    .tp_doc = PyDoc_STR("Tally(on_cut=None, fold=False): a worker's send state and reply buffers "
                        "(fold: histograms)."),
    .tp_basicsize = sizeof(Tally),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Tally_init,
    .tp_dealloc = (destructor)Tally_dealloc,
    .tp_traverse = (traverseproc)Tally_traverse,
    .tp_clear = (inquiry)Tally_clear,
    .tp_members = Tally_members,
    .tp_getset = Tally_getset,
    .tp_methods = Tally_methods,
};

/* -- Stream: the requests of a server's connections, a chunk at a time ------------------- */

typedef struct {
    PyObject_HEAD
    /* () -> the next chunk; None: none now. A chunk is (ops, keys, values, start[, ttl]),
     * lists, or a packed chunk (a replay's lane, from its spool; a plain run's source):
     * (ops, keys, key_starts, key_ends, values, value_starts, value_ends, start, ttl),
     * columns (Packed); ttl: what its stores carry (absent or None: the stream's). The
     * tuple's length tells them apart (PACKED_ITEMS: packed). */
    PyObject *refill;
    PyObject *ops, *keys, *values; /* the list form's; NULL while a packed chunk is loaded */
    Packed packed;                 /* the packed form's (packed.held 0: none) */
    Py_ssize_t size, pos;
    Encoding encoding;
    PyObject *http_target, *http_tail; /* bytes (HTTP's, held for encoding; else NULL) */
    long long completed; /* replies since the last take_completed() */
    int refilling;       /* in refill() or loading what it returned (reentrant()) */
    /* --verify: each set's value is derived here from its key and the next version (the
     * chunk gives its size; -1: sets send the chunk's values), into ``derived``. */
    long long version;
    char *derived;
    Py_ssize_t derived_cap;
    /* --command (RESP, memcached text): the templates a packed chunk's command entries
     * are rendered from (entry i: code COMMAND_BASE + i), borrowing the bytes of
     * ``commands``. */
    PyObject *commands;
    Template *templates;
    Py_ssize_t n_templates;
} Stream;

/* (Checked again once the arguments are read: reading an int may run Python code.) */
static int
Stream_init(Stream *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"refill", "protocol", "ttl",    "flags",
                             "derive_from", "target", "tail", "commands", NULL};
    PyObject *refill, *target = NULL, *tail = NULL, *commands = NULL;
    int protocol;
    long long ttl = 0, flags = 0, derive_from = -1;
    Encoding encoding;
    if (self->refill != NULL)
        return initialized_already("Stream");
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Oi|LL$LOOO", kwlist, &refill, &protocol,
                                     &ttl, &flags, &derive_from, &target, &tail, &commands))
        return -1;
    target = target == Py_None ? NULL : target;
    tail = tail == Py_None ? NULL : tail;
    if ((target != NULL && !PyBytes_Check(target)) || (tail != NULL && !PyBytes_Check(tail))) {
        PyErr_SetString(PyExc_TypeError, "a Stream's target and tail are bytes or None");
        return -1;
    }
    if (encoding_from(protocol, ttl, flags, target ? PyBytes_AS_STRING(target) : "",
                      target ? PyBytes_GET_SIZE(target) : 0,
                      tail ? PyBytes_AS_STRING(tail) : "", tail ? PyBytes_GET_SIZE(tail) : 0,
                      &encoding) < 0)
        return -1;
    Template *templates;
    Py_ssize_t n_templates;
    if (templates_load(commands, &templates, &n_templates) < 0)
        return -1;
    if (n_templates && !wire_encodes(WIRES[protocol], OP_COMMAND)) {
        templates_free(templates, n_templates);
        PyErr_Format(PyExc_ValueError, "protocol %d renders no command templates", protocol);
        return -1;
    }
    if (self->refill != NULL) {
        templates_free(templates, n_templates);
        return initialized_already("Stream");
    }
    self->templates = templates;
    self->n_templates = n_templates;
    self->commands = n_templates ? Py_NewRef(commands) : NULL;
    self->encoding = encoding; /* (its target and tail are the bytes held below) */
    Py_XINCREF(target);
    self->http_target = target;
    Py_XINCREF(tail);
    self->http_tail = tail;
    self->version = derive_from < 0 ? -1 : derive_from;
    Py_INCREF(refill);
    self->refill = refill;
    return 0;
}

static int
Stream_traverse(Stream *self, visitproc visit, void *arg)
{
    Py_VISIT(self->refill);
    Py_VISIT(self->ops);
    Py_VISIT(self->keys);
    Py_VISIT(self->values);
    return packed_traverse(&self->packed, visit, arg);
}

/* Let go of the chunk, whichever form it has. */
static void
Stream_drop_chunk(Stream *self)
{
    Py_CLEAR(self->ops);
    Py_CLEAR(self->keys);
    Py_CLEAR(self->values);
    packed_release(&self->packed);
    self->size = self->pos = 0;
}

static int
Stream_clear(Stream *self)
{
    Py_CLEAR(self->refill);
    Stream_drop_chunk(self);
    return 0;
}

/* (Not in Stream_clear: the encoding borrows their bytes as long as the stream lives;
 * bytes hold no references, so they cannot be in a cycle.) */
static void
Stream_drop_http(Stream *self)
{
    self->encoding.http_target = self->encoding.http_tail = "";
    self->encoding.http_target_len = self->encoding.http_tail_len = 0;
    Py_CLEAR(self->http_target);
    Py_CLEAR(self->http_tail);
}

static void
Stream_dealloc(Stream *self)
{
    PyObject_GC_UnTrack(self);
    Stream_clear(self);
    Stream_drop_http(self);
    /* (not in Stream_clear either: the templates borrow its bytes; a tuple of bytes,
     * pairs of them and None is in no cycle) */
    templates_free(self->templates, self->n_templates);
    self->templates = NULL;
    self->n_templates = 0;
    Py_CLEAR(self->commands);
    PyMem_Free(self->derived);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The chunk's ttl becomes the stream's: checked once, if it differs; -1 with an exception. */
static int
Stream_set_ttl(Stream *self, long long ttl)
{
    if (ttl == self->encoding.ttl)
        return 0;
    Encoding e = self->encoding;
    e.ttl = ttl;
    if (encoding_check(WIRES[e.protocol], &e) < 0)
        return -1;
    self->encoding.ttl = ttl;
    return 0;
}

/* Load a list-form chunk: 0, or -1 with an exception and the stream empty. Only an
 * exhausted chunk is replaced; it is let go before the new one is checked (letting go of
 * objects may run Python code, a finalizer, that could change the new lists). */
static int
Stream_load_lists(Stream *self, PyObject *chunk)
{
    PyObject *ops, *keys, *values;
    Py_ssize_t start;
    long long ttl = self->encoding.ttl;
    if (!PyArg_ParseTuple(chunk,
                          "O!O!O!n|L;refill() must return (ops, keys, values, start[, ttl]) "
                          "lists or a packed chunk of 9 items",
                          &PyList_Type, &ops, &PyList_Type, &keys, &PyList_Type, &values,
                          &start, &ttl))
        return -1;
    Py_INCREF(ops);
    Py_INCREF(keys);
    Py_INCREF(values);
    Stream_drop_chunk(self);
    self->ops = ops;
    self->keys = keys;
    self->values = values;
    Py_ssize_t size = PyList_GET_SIZE(ops);
    if (start < 0 || start >= size || PyList_GET_SIZE(keys) < size ||
        PyList_GET_SIZE(values) < size) {
        PyErr_SetString(PyExc_ValueError, "refill(): no request from start, or short lists");
        return -1;
    }
    if (Stream_set_ttl(self, ttl) < 0) /* a replay's chunk's own ttl */
        return -1;
    self->size = size;
    self->pos = start;
    return 0;
}

/* Load a packed chunk, every column checked first: 0, or -1 with an exception and the
 * stream empty (nothing of a bad chunk is ever sent). Only an exhausted chunk is replaced,
 * so it is let go first: the columns' views are taken where they stay (an exporter may
 * know a view by its address). */
static int
Stream_load_packed(Stream *self, PyObject *chunk)
{
    PyObject *columns[PACKED_COLUMNS];
    for (int i = 0; i < PACKED_COLUMNS; i++)
        columns[i] = PyTuple_GET_ITEM(chunk, i);
    PyObject *start_of = PyTuple_GET_ITEM(chunk, PACKED_COLUMNS);
    PyObject *ttl_of = PyTuple_GET_ITEM(chunk, PACKED_COLUMNS + 1);
    if (!PyLong_Check(start_of) || !(ttl_of == Py_None || PyLong_Check(ttl_of))) {
        PyErr_Format(PyExc_TypeError,
                     "a packed chunk is (ops, keys, key_starts, key_ends, values, value_starts, "
                     "value_ends, start, ttl): start an int, ttl an int or None, not %.50s "
                     "and %.50s",
                     Py_TYPE(start_of)->tp_name, Py_TYPE(ttl_of)->tp_name);
        return -1;
    }
    Py_ssize_t start = PyLong_AsSsize_t(start_of);
    long long ttl = self->encoding.ttl;
    if (!(start == -1 && PyErr_Occurred()) && ttl_of != Py_None)
        ttl = PyLong_AsLongLong(ttl_of);
    if (PyErr_Occurred())
        return -1;
    Stream_drop_chunk(self);
    Packed *k = &self->packed;
    if (packed_load(k, columns, WIRES[self->encoding.protocol], self->n_templates) < 0)
        return -1;
    if (start < 0 || start >= k->size) {
        PyErr_Format(PyExc_ValueError, "packed chunk: start %zd is not one of its %zd requests",
                     start, k->size);
        packed_release(k);
        return -1;
    }
    if (Stream_set_ttl(self, ttl) < 0) {
        packed_release(k);
        return -1;
    }
    self->size = k->size;
    self->pos = start;
    return 0;
}

/* Load the next chunk from refill(): 1; 0 when it has none (refill() returned None: a
 * replay's lane at its end, the stream stays empty); -1 with an exception. */
static int
Stream_next_chunk(Stream *self)
{
    if (self->refilling)
        return reentrant("the refill of a Stream");
    self->refilling = 1;
    pump_python_calls++;
    PyObject *chunk = PyObject_CallNoArgs(self->refill);
    if (chunk == NULL || chunk == Py_None) {
        self->refilling = 0;
        Py_XDECREF(chunk);
        return chunk == NULL ? -1 : 0;
    }
    int loaded;
    if (!PyTuple_Check(chunk)) {
        PyErr_SetString(PyExc_TypeError, "refill() must return a tuple or None");
        loaded = -1;
    }
    else if (PyTuple_GET_SIZE(chunk) == PACKED_ITEMS)
        loaded = Stream_load_packed(self, chunk);
    else
        loaded = Stream_load_lists(self, chunk);
    self->refilling = 0;
    Py_DECREF(chunk);
    return loaded < 0 ? -1 : 1;
}

/* The op of the chunk's request ``at`` (< size); -1 with an exception (a list's op that
 * is no op; a packed chunk's were checked at load). */
static inline long
Stream_op(Stream *self, Py_ssize_t at)
{
    if (self->ops == NULL) { /* (written since the load: the op indexes tables of MAX_OPS) */
        int op = self->packed.ops[at];
        return op < MAX_OPS ? op : packed_changed(at);
    }
    PyObject *item = PyList_GET_ITEM(self->ops, at);
    if (!PyLong_Check(item)) { /* (not an __index__: Python code) */
        PyErr_Format(PyExc_TypeError, "an op must be an int, not %.50s",
                     Py_TYPE(item)->tp_name);
        return -1;
    }
    long op = PyLong_AsLong(item);
    if ((op == -1 && PyErr_Occurred()) || op < 0 || op >= MAX_OPS) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "op %ld out of range", op);
        return -1;
    }
    return op;
}

/* The template a packed chunk's ``op`` is rendered from (a command entry's code), or
 * NULL: a list's command ops are their names' codes, their keys the rendered requests. */
static inline const Template *
Stream_template(const Stream *self, long op)
{
    if (self->ops != NULL || op < COMMAND_BASE || op - COMMAND_BASE >= self->n_templates)
        return NULL;
    return &self->templates[op - COMMAND_BASE];
}

/* The chunk's request ``at`` of ``op`` (Stream_op's), resolved for ``wire``, room
 * reserved in ``o``; -1 with an exception. */
static inline int
Stream_request(Stream *self, const Wire *wire, Py_ssize_t at, long op, Out *o, Request *r)
{
    if (self->ops == NULL)
        return packed_request(&self->packed, wire, at, (int)op, o, r);
    return listed_request(wire, op, PyList_GET_ITEM(self->keys, at),
                          PyList_GET_ITEM(self->values, at), o, r);
}

/* --verify: set ``r``'s value derived from its key and the stream's next version, of
 * the size the chunk gave it (workload/verify.py's derive_value, as the Python source
 * derives them for lists); -1 with an exception. */
static int
Stream_derive(Stream *self, Request *r)
{
    if (r->value_len <= 8 || r->value_len > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "a derived value is 9 bytes to 4 GiB");
        return -1;
    }
    if (grow(&self->derived, &self->derived_cap, r->value_len, 256, 1) < 0)
        return -1;
    verify_derive(r->key, r->key_len, (uint32_t)++self->version, self->derived, r->value_len);
    r->value = self->derived;
    return 0;
}

/* A list-form chunk's lists are still its owner's, who may cut them short after the
 * load: checked when a send or skip begins (between a load and the requests read from
 * it, no Python code runs but the next refill, which loads another chunk). 0, or -1 with
 * a ValueError. */
static int
Stream_check_lists(Stream *self)
{
    if (self->ops == NULL || self->pos >= self->size)
        return 0;
    if (PyList_GET_SIZE(self->ops) < self->size || PyList_GET_SIZE(self->keys) < self->size ||
        PyList_GET_SIZE(self->values) < self->size) {
        PyErr_SetString(PyExc_ValueError,
                        "the chunk's lists were cut short after it was loaded (a stream "
                        "holds them until it has sent them)");
        return -1;
    }
    return 0;
}

static PyObject *
Stream_take_completed(Stream *self, PyObject *unused)
{
    if (self->refill == NULL) {
        not_initialized("Stream");
        return NULL;
    }
    long long completed = self->completed;
    self->completed = 0;
    return PyLong_FromLongLong(completed);
}

PyDoc_STRVAR(Stream_skip_doc,
"skip(n) -> bytes\n\n"
"Take the next ``n`` requests off the stream unsent (the open loop's dropped ones): their\n"
"ops, in order. A refill that raises stops it: the ops taken before it are lost with it.");

static PyObject *
Stream_skip(Stream *self, PyObject *arg)
{
    if (self->refill == NULL) {
        not_initialized("Stream");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "skip() takes a count >= 0");
        return NULL;
    }
    if (Stream_check_lists(self) < 0)
        return NULL;
    PyObject *ops = PyBytes_FromStringAndSize(NULL, n);
    if (ops == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int loaded = self->pos < self->size ? 1 : Stream_next_chunk(self);
        if (loaded <= 0) {
            if (loaded == 0)
                PyErr_SetString(PyExc_RuntimeError, "a skipped request was not in its source");
            Py_DECREF(ops);
            return NULL;
        }
        long op = Stream_op(self, self->pos);
        if (op < 0) {
            Py_DECREF(ops);
            return NULL;
        }
        const Template *t = Stream_template(self, op);
        PyBytes_AS_STRING(ops)[i] = (char)(t != NULL ? t->record : op);
        self->pos++;
    }
    return ops;
}

PyDoc_STRVAR(Stream_restart_doc,
"restart() -> None\n\n"
"Drop the rest of the chunk unsent: the next request comes from a fresh refill (a Redis\n"
"Cluster slot moved, and the source draws other keys now).");

static PyObject *
Stream_restart(Stream *self, PyObject *unused)
{
    if (self->refill == NULL) {
        not_initialized("Stream");
        return NULL;
    }
    if (self->refilling) {
        reentrant("Stream.restart()");
        return NULL;
    }
    self->pos = self->size;
    Py_RETURN_NONE;
}

static PyMemberDef Stream_members[] = {
    {"pos", T_PYSSIZET, offsetof(Stream, pos), READONLY, "next request of the chunk"},
    {"size", T_PYSSIZET, offsetof(Stream, size), READONLY, "requests in the chunk"},
    {NULL},
};

static PyMethodDef Stream_methods[] = {
    {"take_completed", (PyCFunction)Stream_take_completed, METH_NOARGS,
     PyDoc_STR("Replies received since the last call (all of the stream's pumps).")},
    {"skip", (PyCFunction)Stream_skip, METH_O, Stream_skip_doc},
    {"restart", (PyCFunction)Stream_restart, METH_NOARGS, Stream_restart_doc},
    {NULL},
};

static PyTypeObject StreamType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kvbench.engine._pump.Stream",
    .tp_doc = PyDoc_STR("Stream(refill, protocol, ttl=0, flags=0, *, derive_from=-1, "
                        "target=None, tail=None, commands=None): the requests of a server's "
                        "pumps, or of one pump (a replay's lane); HTTP's requests start with "
                        "``target`` (GET /<path>?cmd=) and end with ``tail`` ( HTTP/1.1, the "
                        "Host field); a packed chunk's command entries (codes from "
                        "COMMAND_BASE) are rendered from ``commands``' templates, a tuple of "
                        "(record, pieces)."),
    .tp_basicsize = sizeof(Stream),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Stream_init,
    .tp_dealloc = (destructor)Stream_dealloc,
    .tp_traverse = (traverseproc)Stream_traverse,
    .tp_clear = (inquiry)Stream_clear,
    .tp_members = Stream_members,
    .tp_methods = Stream_methods,
};

/* A connection's first request buffer and in-flight ring: room for a few requests (a
 * pipeline of 1 sends one), doubled when a deeper pipeline or a larger value needs more.
 * Kept per connection: at 4 KiB and 64 entries (2 KiB) they were 6 of the ~15 KB each of
 * 10,000 connections cost its worker. */
#define PUMP_OUT_FIRST 512
#define PUMP_FIFO_FIRST 8

/* -- Pump: one connection's closed loop ------------------------------------------------- */

/* received() and issue() results besides "nothing to do" (0). */
/* PUMP_CLOSING: the server announced that it closes the connection after the reply just
 * read (HTTP), as py_pump.CLOSING. */
enum { PUMP_OK = 0, PUMP_IDLE = 1, PUMP_ERROR = 2, PUMP_CLOSING = 3 };

/* A request in flight: its op, when it was sent and when it was due (open loop; the
 * send time in a closed loop), and the tags its reply is checked with; once answered,
 * its reply's length (kept for unaccount()). */
typedef struct {
    long long sent_ns, intended_ns;
    Py_ssize_t reply_len;
    uint32_t tag, keys;
    uint32_t key_at, key_len; /* --verify: a get's key in the pump's ``keys`` */
    unsigned char op;
    /* --verify, exact: the get follows a set of its key, whose value's first EXACT_HEAD
     * bytes follow the key in ``keys`` (the value must be that set's) */
    unsigned char expect;
    /* An rmw's set's tag (``tag`` is its get's). */
    uint32_t set_tag;
} Pending;

/* Redis Cluster: a request in flight as it was written (``at``, ``len`` into the pump's
 * ``sent``), to be sent on where a -MOVED or -ASK reply says; how many times it was
 * redirected before (0: it was drawn here; a guest, sent on from another connection, has
 * hops > 0, and its reply frees no pipeline slot here); and whether an ASKING went
 * before it, whose reply comes first (``asked`` until it is read). One per FIFO entry, at
 * the same ring position. */
typedef struct {
    uint32_t at, len;
    unsigned char hops, asked;
} Kept;

typedef struct {
    PyObject_HEAD
    Tally *tally;
    Stream *stream;
    PyObject *write; /* the transport's write */
    PyObject *error; /* the grammar error that stopped the pump, or None */
    PyObject *on_stopped; /* data_received's caller of a non-zero status, or None */
    const Wire *wire;
    long long max_reply;
    /* The ttl this connection's stores carry in place of the stream's (a --ttl range:
     * each connection draws its own, as its codec does), or -1: the stream's. */
    long long ttl;
    /* Open loop: requests are sent only by issue_scheduled, latency is measured from
     * their intended times, and a send more than late_ns behind its slot is late. */
    int open_loop;
    long long late_ns;
    unsigned char family[MAX_OPS];
    /* The code an rmw is sent as: OP_RMW, or -1 where that code is a command's (its
     * family F_COMMAND: config never sends both). */
    long rmw_op;
    /* In-flight FIFO: a ring of requests. */
    Pending *fifo;
    Py_ssize_t fifo_cap, fifo_head, fifo_len;
    /* This connection's opaques (binary, meta): the next to send; the last answered. */
    uint32_t opaque, answered;
    /* Bytes of an incomplete reply, kept for the next read. */
    char *in;
    Py_ssize_t in_len, in_cap;
    /* One write's bytes. */
    char *out;
    Py_ssize_t out_cap;
    int busy; /* in pump_send: it refuses every call that changes it (reentrant()) */
    /* The compiled event loop's connection it sends on (_pump_loop.c), or NULL: writes
     * go to the loop's socket in C instead of to ``write``. */
    Poller *poller;
    Py_ssize_t slot;
    /* --verify: how a get hit's value is checked (VERIFY_*), a timestamp's window (low
     * -1: none), and the keys of the gets in flight end to end, in the order sent. */
    int verify;
    long long window_low_ms, window_high_ms;
    char *keys;
    Py_ssize_t keys_len, keys_cap;
    /* --verify, exact (set-then-get): a get right after the set of its key must return
     * that set's value. The last set's key and its value's first EXACT_HEAD bytes, end
     * to end (last_set_len: the key's length; -1: no set yet). */
    int exact;
    char *last_set;
    Py_ssize_t last_set_len, last_set_cap;
    /* The rmw at the FIFO's head once its get's reply is read: that reply's code and
     * length, until its set's completes it (half_code -1: none read). */
    long long half_code;
    Py_ssize_t half_len;
    /* A reply said the server closes the connection after it: any byte after is an
     * error, and nothing more is sent. */
    int closing;
    /* --verify against an HTTP gateway: what each value byte is stored as (NULL: itself),
     * and a chunked get hit's value joined (Scan.value_chunked). */
    const unsigned char *value_map;
    char *joined;
    Py_ssize_t joined_cap;
    /* Redis Cluster (``cluster``): each request in flight is kept as written (``kept``,
     * beside the FIFO; its bytes in ``sent``, oldest first). A -MOVED or -ASK reply takes
     * its request out of the FIFO (its pipeline slot is free) and hands it, with where to
     * send it, to ``on_redirect`` (engine/redirect.py's router), which sends it on as a
     * guest (``send_guest``) on a connection of the node named. */
    int cluster;
    Kept *kept;
    char *sent;
    Py_ssize_t sent_len, sent_cap;
    PyObject *on_redirect;
} Pump;

static int
Pump_init(Pump *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"tally",   "stream", "write",     "protocol", "families",
                             "max_reply", "open_loop", "late_ns", "verify", "window_ms",
                             "exact",   "ttl",    "cluster",   NULL};
    PyObject *tally, *stream, *write;
    Py_buffer families;
    int protocol, open_loop = 0, verify = VERIFY_NONE, exact = 0, cluster = 0;
    long long max_reply, late_ns = 0, window_low = -1, window_high = -1, ttl = -1;
    if (self->tally != NULL)
        return initialized_already("Pump");
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!Oiy*L|pLi(LL)pLp", kwlist, &TallyType,
                                     &tally, &StreamType, &stream, &write, &protocol, &families,
                                     &max_reply, &open_loop, &late_ns, &verify, &window_low,
                                     &window_high, &exact, &ttl, &cluster))
        return -1;
    if (self->tally != NULL) { /* (reading an int may run Python code) */
        PyBuffer_Release(&families);
        return initialized_already("Pump");
    }
    if (((Tally *)tally)->on_cut == NULL || ((Stream *)stream)->refill == NULL) {
        PyBuffer_Release(&families);
        return not_initialized(((Tally *)tally)->on_cut == NULL ? "Tally" : "Stream");
    }
    const Wire *wire = wire_of(protocol);
    if (wire == NULL || protocol != ((Stream *)stream)->encoding.protocol) {
        PyBuffer_Release(&families);
        if (wire != NULL)
            PyErr_Format(PyExc_ValueError, "the stream encodes protocol %d, not %d",
                         ((Stream *)stream)->encoding.protocol, protocol);
        return -1;
    }
    if (families.len > MAX_OPS) {
        PyBuffer_Release(&families);
        PyErr_Format(PyExc_ValueError, "at most %d ops", MAX_OPS);
        return -1;
    }
    if (ttl != -1) { /* one the protocol carries, as a stream's */
        Encoding own = ((Stream *)stream)->encoding;
        own.ttl = ttl;
        if (encoding_check(wire, &own) < 0) {
            PyBuffer_Release(&families);
            return -1;
        }
    }
    if (verify < VERIFY_NONE || verify >= VERIFY_COUNT ||
        (window_low >= 0 && (window_low > window_high || verify != VERIFY_TIMESTAMP)) ||
        (exact && verify == VERIFY_NONE)) {
        PyBuffer_Release(&families);
        PyErr_SetString(PyExc_ValueError,
                        "verify is 0, 1 or 2; a window (low <= high) is 2's; exact needs 1 or 2");
        return -1;
    }
    self->out = PyMem_Malloc(PUMP_OUT_FIRST); /* (out_reserve's first size is larger) */
    if (self->out == NULL) {
        PyBuffer_Release(&families);
        PyErr_NoMemory();
        return -1;
    }
    self->out_cap = PUMP_OUT_FIRST;
    memset(self->family, F_NONE, sizeof self->family);
    for (Py_ssize_t i = 0; i < families.len; i++) {
        unsigned char f = ((const unsigned char *)families.buf)[i];
        self->family[i] = f < F_COUNT ? f : F_NONE;
        if (f == F_COMMAND && !wire_encodes(wire, OP_COMMAND)) {
            PyBuffer_Release(&families);
            PyErr_Format(PyExc_ValueError, "protocol %d sends no arbitrary commands", protocol);
            return -1;
        }
    }
    PyBuffer_Release(&families);
    self->rmw_op = self->family[OP_RMW] == F_COMMAND ? -1 : OP_RMW;
    /* (A cluster's rmw, two requests answered as one, goes on the Python driver:
     * engine/fastpath.py.) */
    if (cluster && protocol != P_RESP2 && protocol != P_RESP3) {
        PyErr_SetString(PyExc_ValueError, "a cluster pump speaks RESP");
        return -1;
    }
    self->cluster = cluster;
    Py_INCREF(tally);
    self->tally = (Tally *)tally;
    Py_INCREF(stream);
    self->stream = (Stream *)stream;
    Py_INCREF(write);
    self->write = write;
    Py_INCREF(Py_None);
    self->error = Py_None;
    self->wire = wire;
    self->max_reply = max_reply;
    self->ttl = ttl;
    self->open_loop = open_loop;
    self->late_ns = late_ns;
    self->verify = verify;
    self->value_map = wire == &http_wire ? http_value_map() : NULL;
    self->window_low_ms = window_low < 0 ? -1 : window_low;
    self->window_high_ms = window_high;
    self->exact = exact;
    self->last_set_len = -1;
    self->half_code = -1;
    /* As a fresh codec: the first request gets opaque 0, and "the last one answered" is
     * the one before it (protocols/memcache_binary.py). */
    self->opaque = 0;
    self->answered = UINT32_MAX;
    return 0;
}

static int
Pump_traverse(Pump *self, visitproc visit, void *arg)
{
    Py_VISIT(self->tally);
    Py_VISIT(self->stream);
    Py_VISIT(self->write);
    Py_VISIT(self->error);
    Py_VISIT(self->on_stopped);
    Py_VISIT(self->on_redirect);
    return 0;
}

static int
Pump_clear(Pump *self)
{
    if (self->tally != NULL) /* what it had in flight leaves the tally's count with it */
        self->tally->inflight -= self->fifo_len;
    self->fifo_len = 0;
    Py_CLEAR(self->tally);
    Py_CLEAR(self->stream);
    Py_CLEAR(self->write);
    Py_CLEAR(self->error);
    Py_CLEAR(self->on_stopped);
    Py_CLEAR(self->on_redirect);
    return 0;
}

static void
Pump_dealloc(Pump *self)
{
    PyObject_GC_UnTrack(self);
    Pump_clear(self);
    PyMem_Free(self->fifo);
    PyMem_Free(self->in);
    PyMem_Free(self->out);
    PyMem_Free(self->keys);
    PyMem_Free(self->last_set);
    PyMem_Free(self->joined);
    PyMem_Free(self->kept);
    PyMem_Free(self->sent);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The i-th request in flight (0: the oldest). */
static inline Pending *
fifo_at(Pump *self, Py_ssize_t i)
{
    return &self->fifo[(self->fifo_head + i) % self->fifo_cap];
}

/* A cluster pump's kept request beside the i-th request in flight. */
static inline Kept *
kept_at(Pump *self, Py_ssize_t i)
{
    return &self->kept[(self->fifo_head + i) % self->fifo_cap];
}

/* Room in the ring for ``more`` entries (unrolled into a fresh array when it grows; a
 * cluster pump's kept requests with them). */
static int
fifo_reserve(Pump *self, Py_ssize_t more)
{
    Py_ssize_t need = self->fifo_len + more;
    if (need <= self->fifo_cap)
        return 0;
    Py_ssize_t cap = self->fifo_cap ? self->fifo_cap : PUMP_FIFO_FIRST;
    while (cap < need)
        cap *= 2;
    Pending *fifo = PyMem_Malloc((size_t)cap * sizeof(Pending));
    Kept *kept = self->cluster ? PyMem_Malloc((size_t)cap * sizeof(Kept)) : NULL;
    if (fifo == NULL || (self->cluster && kept == NULL)) {
        PyMem_Free(fifo);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < self->fifo_len; i++) {
        fifo[i] = *fifo_at(self, i);
        if (kept != NULL)
            kept[i] = *kept_at(self, i);
    }
    PyMem_Free(self->fifo);
    PyMem_Free(self->kept);
    self->fifo = fifo;
    self->kept = kept;
    self->fifo_cap = cap;
    self->fifo_head = 0;
    return 0;
}

/* Bytes kept for the requests in flight, end to end, oldest first, each request's at an
 * offset its entry holds (uint32): --verify's gets' keys, a cluster's requests as written.
 * ``n`` more bytes appended (``*len`` grows by them); -1 with an exception. */
static int
held_put(char **buf, Py_ssize_t *len, Py_ssize_t *cap, const char *p, Py_ssize_t n,
         const char *what)
{
    if (*len + n > (Py_ssize_t)UINT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "more than 4 GiB of %s in flight", what);
        return -1;
    }
    if (grow(buf, cap, *len + n, 256, 1) < 0)
        return -1;
    memcpy(*buf + *len, p, (size_t)n);
    *len += n;
    return 0;
}

/* The first ``oldest`` of those bytes dropped (no request in flight needs them): the rest
 * moves to the front; the caller takes ``oldest`` off its entries' offsets. */
static void
held_drop(char *buf, Py_ssize_t *len, Py_ssize_t oldest)
{
    memmove(buf, buf + oldest, (size_t)(*len - oldest));
    *len -= oldest;
}

/* Redis Cluster: the bytes of the requests in flight move to the front of ``sent``, their
 * kept entries with them. */
static void
sent_compact(Pump *self)
{
    Py_ssize_t oldest = self->fifo_len ? kept_at(self, 0)->at : self->sent_len;
    if (oldest == 0)
        return;
    held_drop(self->sent, &self->sent_len, oldest);
    for (Py_ssize_t i = 0; i < self->fifo_len; i++)
        kept_at(self, i)->at -= (uint32_t)oldest;
}

/* Redis Cluster: keep the ``n`` bytes just written; -1 with an exception. */
static int
sent_put(Pump *self, const char *p, Py_ssize_t n)
{
    return held_put(&self->sent, &self->sent_len, &self->sent_cap, p, n, "requests");
}

/* --verify: the keys of the requests in flight move to the front of ``keys``, their FIFO
 * entries with them. */
static void
keys_compact(Pump *self)
{
    Py_ssize_t oldest = self->fifo_len ? fifo_at(self, 0)->key_at : self->keys_len;
    if (oldest == 0)
        return;
    held_drop(self->keys, &self->keys_len, oldest);
    for (Py_ssize_t i = 0; i < self->fifo_len; i++)
        fifo_at(self, i)->key_at -= (uint32_t)oldest;
}

/* --verify: keep a get's key until its reply is checked; -1 with an exception. */
static int
keys_put(Pump *self, const char *key, Py_ssize_t n)
{
    return held_put(&self->keys, &self->keys_len, &self->keys_cap, key, n, "keys");
}

/* The bytes of a value an exact check compares (verify_derived: the header, the rest
 * derived from it and the key; a timestamp: all of it). */
#define EXACT_HEAD 8

/* --verify, exact: remember set ``r`` as the last one sent (a value too short to compare
 * is no expectation); -1 with an exception. */
static int
exact_set(Pump *self, const Request *r)
{
    self->last_set_len = -1;
    if (r->value_len < EXACT_HEAD)
        return 0;
    if (grow(&self->last_set, &self->last_set_cap, r->key_len + EXACT_HEAD, 64, 1) < 0)
        return -1;
    memcpy(self->last_set, r->key, (size_t)r->key_len);
    memcpy(self->last_set + r->key_len, r->value, EXACT_HEAD);
    self->last_set_len = r->key_len;
    return 0;
}

/* --verify, exact: whether get ``r`` follows a set of its key (remembered by exact_set). */
static int
exact_get(const Pump *self, const Request *r)
{
    return self->last_set_len == r->key_len &&
           memcmp(self->last_set, r->key, (size_t)r->key_len) == 0;
}

/* Send n requests from the stream in one write. ``intended`` (open loop) is a list of
 * at least n ints, each request's due time: its lag behind it is recorded, and the sends
 * counted; NULL (closed loop): each is due when sent, and the budget is drawn down, and
 * a stream with nothing more to send (a replay's lane at its end) sends what it has: none
 * is PUMP_IDLE (the worker may be finished), as the Python driver's Connection.issue
 * does. Returns PUMP_OK, PUMP_IDLE or -1 with an exception. */
static int pump_send_busy(Pump *self, Py_ssize_t n, PyObject *intended, const long long *times);

/* Its callers refused a call into a busy pump (pump_ready, Pump_received): the send holds
 * the output buffer and the FIFO's next slots in locals across the refill it may call,
 * then calls the transport's write; a call back into the pump from either is refused.
 * (The shared tally is reserved for after the refills: another pump may fill it there.) */
static int
pump_send(Pump *self, Py_ssize_t n, PyObject *intended, const long long *times)
{
    if (Stream_check_lists(self->stream) < 0)
        return -1;
    self->busy = 1;
    int status = pump_send_busy(self, n, intended, times);
    self->busy = 0;
    return status;
}

static int
pump_send_busy(Pump *self, Py_ssize_t n, PyObject *intended, const long long *times)
{
    Tally *tally = self->tally;
    Stream *stream = self->stream;
    if (fifo_reserve(self, n) < 0)
        return -1;
    long long sent = monotonic_ns();
    Out o = {self->out, 0, self->out_cap};
    const Wire *wire = self->wire;
    /* The stream's encoding (a replay's chunk may change its ttl in the loop), or the
     * connection's own ttl with the stream's other settings. */
    Encoding own = stream->encoding;
    own.ttl = self->ttl;
    const Encoding *encoding = self->ttl == -1 ? &stream->encoding : &own;
    Tags tags = {self->opaque, 0, 0};
    Py_ssize_t i = 0;
    int empty = 0;
    if (self->verify)
        keys_compact(self);
    if (self->cluster)
        sent_compact(self);
    Py_ssize_t keys_mark = self->keys_len; /* what the keys were, if nothing is sent */
    for (; i < n; i++) {
        long long due = sent;
        if (intended != NULL) {
            /* (a refill runs Python code: the list is checked again at every request) */
            if (i >= PyList_GET_SIZE(intended)) {
                PyErr_SetString(PyExc_ValueError, "fewer intended times than requests");
                break;
            }
            PyObject *item = PyList_GET_ITEM(intended, i);
            if (!PyLong_Check(item)) { /* (not an __index__: Python code) */
                PyErr_Format(PyExc_TypeError, "intended times must be ints, not %.50s",
                             Py_TYPE(item)->tp_name);
                break;
            }
            due = PyLong_AsLongLong(item);
            if (due == -1 && PyErr_Occurred())
                break;
        }
        else if (times != NULL) /* the event loop's schedule (_pump_loop.c) */
            due = times[i];
        if (stream->pos == stream->size) {
            int loaded = Stream_next_chunk(stream);
            if (loaded < 0)
                break;
            if (loaded == 0) { /* nothing more to send (a replay's lane at its end) */
                if (intended == NULL && times == NULL) {
                    empty = 1;
                    break;
                }
                PyErr_SetString(PyExc_RuntimeError, "a scheduled request was not in its source");
                break;
            }
        }
        Py_ssize_t at = stream->pos;
        if (stream->ops == NULL && at + PREFETCH_AHEAD < stream->size)
            packed_prefetch(&stream->packed, at + PREFETCH_AHEAD);
        long op = Stream_op(stream, at);
        if (op < 0)
            break;
        /* What the wire sends: a command's code as OP_COMMAND; a packed chunk's command
         * entry rendered from its template, recorded as its name's code (a list's command
         * ops are their names' codes already, their keys the requests rendered). */
        long sent_op = self->family[op] == F_COMMAND ? OP_COMMAND : op;
        const Template *template = sent_op == OP_COMMAND ? Stream_template(stream, op) : NULL;
        Py_ssize_t before = o.len;
        Request r;
        if (template != NULL) {
            if (packed_command(&stream->packed, at, template, &o, &r) < 0)
                break;
            op = template->record;
        }
        else if (Stream_request(stream, wire, at, sent_op, &o, &r) < 0 ||
                 (stream->version >= 0 && op == OP_SET && Stream_derive(stream, &r) < 0))
            break;
        uint32_t key_at = (uint32_t)self->keys_len, key_len = 0;
        unsigned char expect = 0;
        if (self->verify && op == OP_GET) {
            expect = self->exact && exact_get(self, &r);
            if (keys_put(self, r.key, r.key_len) < 0 ||
                (expect && keys_put(self, self->last_set + r.key_len, EXACT_HEAD) < 0)) {
                self->keys_len = key_at;
                break;
            }
            key_len = (uint32_t)r.key_len;
        }
        Tags before_tags = tags;
        uint32_t get_tag = 0;
        if (template != NULL)
            template_render(template, &r, &o);
        else if (encode_request(wire, encoding, (int)sent_op, &r, &tags, &o, &get_tag) < 0 ||
                 (self->exact && op == OP_SET && exact_set(self, &r) < 0)) {
            o.len = before; /* (a failed encode appended nothing, used no opaque) */
            tags = before_tags;
            self->keys_len = key_at;
            break;
        }
        tally->tx[op] += o.len - before;
        *fifo_at(self, self->fifo_len + i) =
            sent_op == OP_RMW ? (Pending){sent, due, 0, get_tag, 0, key_at, key_len, OP_RMW, 0, tags.tag}
                         : (Pending){sent, due, 0, tags.tag, tags.keys, key_at, key_len,
                                     (unsigned char)op, expect, 0};
        if (self->cluster) /* (the write's bytes go to the end of ``sent`` below) */
            *kept_at(self, self->fifo_len + i) =
                (Kept){(uint32_t)(self->sent_len + before), (uint32_t)(o.len - before), 0, 0};
        stream->pos++;
    }
    self->out = o.p;
    self->out_cap = o.cap;
    /* A refill or an encoding failed at request i (not a server's doing): the i requests
     * before it were taken from the stream, so they are sent and kept in flight like any
     * others, and the error is raised after the write. */
    PyObject *failure = i < n && !empty ? PyErr_GetRaisedException() : NULL;
    if (i == 0) {
        self->keys_len = keys_mark;
        if (empty)
            return PUMP_IDLE;
        PyErr_SetRaisedException(failure);
        return -1;
    }
    /* On the event loop (a poller): the bytes go to its socket from the buffer, no
     * Python object or call; else one bytes object to the transport's write. */
    Poller *poller = self->poller;
    int scheduled = intended != NULL || times != NULL;
    int reserved = !scheduled ||
                   (tally->fold ? (tally->lag_hdr.counts != NULL || hdr_ready(&tally->lag_hdr) == 0)
                                : i64s_reserve(&tally->lag, i) == 0);
    Py_ssize_t sent_mark = self->sent_len; /* a cluster pump keeps the write's bytes */
    if (reserved && self->cluster && sent_put(self, o.p, o.len) < 0)
        reserved = 0;
    PyObject *bytes = reserved && poller == NULL ? PyBytes_FromStringAndSize(o.p, o.len) : NULL;
    PyObject *result = NULL;
    int in_flight = bytes != NULL || (reserved && poller != NULL);
    if (!in_flight)
        self->sent_len = sent_mark;
    if (in_flight) {
        if (scheduled) {
            for (Py_ssize_t k = 0; k < i; k++) {
                const Pending *request = fifo_at(self, self->fifo_len + k);
                long long lag = sent - request->intended_ns;
                if (tally->fold)
                    hdr_add(&tally->lag_hdr, lag);
                else
                    tally->lag.v[tally->lag.len++] = lag;
                if (lag > self->late_ns)
                    tally->late[request->op]++;
            }
            tally->sent += i;
        }
        else if (tally->budget >= 0)
            tally->budget -= i;
        self->fifo_len += i;
        tally->inflight += i;
        self->opaque = tags.next; /* the opaques of the i requests in flight */
        tally->bytes_out += o.len;
        if (poller != NULL) {
            poller_send(poller, self->slot, o.p, o.len);
            result = Py_NewRef(Py_None);
        }
        else {
            pump_python_calls++;
            result = PyObject_CallOneArg(self->write, bytes);
            Py_DECREF(bytes);
        }
    }
    if (result == NULL) { /* the write's own error; the earlier one is its context */
        if (!in_flight)
            self->keys_len = keys_mark;
        if (failure != NULL) {
            PyObject *error = PyErr_GetRaisedException();
            PyException_SetContext(error, failure);
            PyErr_SetRaisedException(error);
        }
        return -1;
    }
    Py_DECREF(result);
    if (failure != NULL) {
        PyErr_SetRaisedException(failure);
        return -1;
    }
    return PUMP_OK;
}

/* Closed loop: send up to n requests in one write. Returns PUMP_OK, PUMP_IDLE (nothing
 * may be sent: the worker should check whether it is finished) or -1 with an exception. */
static int
pump_issue(Pump *self, Py_ssize_t n)
{
    Tally *tally = self->tally;
    if (!tally->issuing || self->open_loop) /* open loop: only the schedule sends */
        return PUMP_IDLE;
    if (tally->budget >= 0) {
        if (n > tally->budget)
            n = (Py_ssize_t)tally->budget;
        if (n <= 0)
            return PUMP_IDLE;
    }
    return pump_send(self, n, NULL, NULL);
}

/* An rmw's reply code from its get's and its set's (engine/rmw.py's fold): the get's,
 * or an error reply (with the get's keys) when either half was one. */
static inline long long
rmw_fold(long long get_code, long long set_code)
{
    long long mask = (1LL << KEYS_SHIFT) - 1;
    if ((get_code & mask) == K_ERROR || (set_code & mask) == K_ERROR)
        return K_ERROR | (get_code & ~mask);
    return get_code;
}

static void
account(Pump *self, Tally *tally, Pending *request, long long code, Py_ssize_t len,
        long long now)
{
    request->reply_len = len;
    tally->rx[request->op] += len;
    tally->ops.v[tally->ops.len++] = request->op;
    tally->codes.v[tally->codes.len++] = code;
    /* From the intended time (the send time in a closed loop): coordinated omission. */
    tally->latency.v[tally->latency.len++] = now - request->intended_ns;
    if (self->open_loop)
        tally->service.v[tally->service.len++] = now - request->sent_ns;
    self->fifo_head = (self->fifo_head + 1) % self->fifo_cap;
    self->fifo_len--;
    tally->inflight--;
}

/* Take back the last ``n`` requests the replies of this read took off the FIFO (the
 * read broke the protocol), ``recorded`` of them accounted (the others a cluster's
 * redirects, not yet handed on): once a reply cannot belong to its request, which
 * request the others before it in the same read belonged to is not known, so none is
 * attributed. Their requests go back to the FIFO's head, untouched since (a ring keeps an
 * entry until it is overwritten by a send, and none was sent since), and end with the
 * rest of the FIFO as protocol errors (the driver's drop()). */
static void
unaccount(Pump *self, Tally *tally, Py_ssize_t n, Py_ssize_t recorded)
{
    if (n == 0)
        return;
    tally->ops.len -= recorded;
    tally->codes.len -= recorded;
    tally->latency.len -= recorded;
    if (self->open_loop)
        tally->service.len -= recorded;
    self->fifo_head = (self->fifo_head + self->fifo_cap - n % self->fifo_cap) % self->fifo_cap;
    self->fifo_len += n;
    tally->inflight += n;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Pending *request = fifo_at(self, i);
        tally->rx[request->op] -= request->reply_len;
    }
}

/* A pump's method that changes it may run: initialized, and not inside its own send. */
static int
pump_ready(Pump *self, const char *call)
{
    if (self->tally == NULL)
        return not_initialized("Pump");
    return self->busy ? reentrant(call) : 0;
}

static int
set_error(Pump *self, const Scan *scan)
{
    PyObject *text = scan_error(scan);
    if (text == NULL)
        return -1;
    Py_XSETREF(self->error, text);
    return 0;
}

PyDoc_STRVAR(Pump_received_doc,
"received(data) -> int\n\n"
"Account every complete reply in ``data`` (and bytes kept from earlier reads), then send\n"
"as many new requests in one write. Returns 0; 1 when none could be sent (not issuing,\n"
"or the budget is spent: ask the worker whether it is finished); 2 on a grammar error\n"
"(``error`` says which; none of this read's replies is accounted: their requests are in\n"
"flight again, for drop(); the pump is unusable).");

static int pump_take(Pump *self, const char *buf, Py_ssize_t n);

/* -- Redis Cluster redirects ------------------------------------------------------------- */

/* Hash slots in a cluster (protocols/resp_cluster.py's SLOTS). */
#define CLUSTER_SLOTS 16384

/* A redirect: its kind (K_MOVED, K_ASK), slot, the host as the reply spells it (bytes in
 * the reply; empty: the host of the node that answered) and port. */
typedef struct {
    int kind;
    long slot, port;
    const char *host;
    Py_ssize_t host_len;
} Redirect;

/* Python's bytes.strip(): the ASCII whitespace. */
static inline int
ascii_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* 1 to 5 ASCII digits' value (bytes.isdigit(), and parse_redirect's length bound); 0 for
 * anything else. */
static int
short_number(const char *p, Py_ssize_t n, long *value)
{
    if (n < 1 || n > 5)
        return 0;
    long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        v = v * 10 + (p[i] - '0');
    }
    *value = v;
    return 1;
}

/* Whether an error reply's text (``text[0:n]``, without its ``-`` and CRLF) is a redirect,
 * read rule for rule as protocols/resp_cluster.py's parse_redirect reads it: the word
 * MOVED or ASK, a space, then (stripped) ``<slot> <host>:<port>``, the host everything
 * before the last colon, slot and port 1 to 5 digits, slot < 16384, 0 < port < 65536.
 * Anything else (a MOVED whose slot or address does not parse too) is an error reply. */
static int
redirect_parse(const char *text, Py_ssize_t n, Redirect *r)
{
    const char *space = memchr(text, ' ', (size_t)n);
    Py_ssize_t word = space != NULL ? space - text : n;
    if (word == 5 && memcmp(text, "MOVED", 5) == 0)
        r->kind = K_MOVED;
    else if (word == 3 && memcmp(text, "ASK", 3) == 0)
        r->kind = K_ASK;
    else
        return 0;
    if (space == NULL)
        return 0;
    const char *p = space + 1, *end = text + n;
    while (p < end && ascii_space(*p))
        p++;
    while (end > p && ascii_space(end[-1]))
        end--;
    const char *gap = memchr(p, ' ', (size_t)(end - p));
    const char *slot_end = gap != NULL ? gap : end;
    const char *address = gap != NULL ? gap + 1 : end;
    const char *colon = NULL;
    for (const char *q = end; q > address;)
        if (*--q == ':') {
            colon = q;
            break;
        }
    const char *port = colon != NULL ? colon + 1 : address;
    r->host = address;
    r->host_len = colon != NULL ? colon - address : 0;
    return short_number(p, slot_end - p, &r->slot) && short_number(port, end - port, &r->port) &&
           r->slot < CLUSTER_SLOTS && r->port > 0 && r->port < 65536;
}

/* The request at the FIFO's head, redirected by ``r``: taken out of the FIFO (its slot
 * of the pipeline is free; its reply counted nowhere) and appended to ``*out`` (made on
 * the first) as on_redirect's item: (kind, slot, host, port, op, keys, request, key,
 * sent_ns, intended_ns, hops), ``key`` a --verify'd get's key (else None), intended_ns
 * None in a closed loop. 0, or -1 with an exception (the FIFO as it was). */
static int
redirect_take(Pump *self, const Redirect *r, PyObject **out)
{
    Pending *request = fifo_at(self, 0);
    const Kept *kept = kept_at(self, 0);
    if (*out == NULL && (*out = PyList_New(0)) == NULL)
        return -1;
    PyObject *key = self->verify && request->op == OP_GET
                        ? PyBytes_FromStringAndSize(self->keys + request->key_at, request->key_len)
                        : Py_NewRef(Py_None);
    PyObject *item =
        key == NULL ? NULL
                    : Py_BuildValue("(ily#liIy#NLNi)", r->kind, r->slot, r->host, r->host_len,
                                    r->port, (int)request->op, request->keys,
                                    self->sent + kept->at, (Py_ssize_t)kept->len, key,
                                    request->sent_ns,
                                    self->open_loop ? PyLong_FromLongLong(request->intended_ns)
                                                    : Py_NewRef(Py_None),
                                    (int)kept->hops);
    if (item == NULL || PyList_Append(*out, item) < 0) {
        Py_XDECREF(item);
        return -1;
    }
    Py_DECREF(item);
    request->reply_len = 0; /* (what unaccount() takes back from the op's bytes) */
    self->fifo_head = (self->fifo_head + 1) % self->fifo_cap;
    self->fifo_len--;
    self->tally->inflight--;
    return 0;
}

/* ASKING's reply, before the reply of the guest an ASK sent on: ``+OK`` (or hiredis's
 * same reading of it, ``$2 OK``), consumed, answering no request; anything else means
 * the node is no cluster node (protocols/resp.py's ``_on_asking``). As scan_reply. */
static Py_ssize_t
asking_reply(const Wire *wire, const char *p, Py_ssize_t n, long long max, Scan *s)
{
    static const Head any = {OP_COMMAND, F_COMMAND, 0, 0};
    Py_ssize_t k = scan_reply(wire, p, n, &any, max, s);
    if (k <= 0 || s->skipped)
        return k;
    if ((k == 5 && memcmp(p, "+OK\r\n", 5) == 0) || (k == 8 && memcmp(p, "$2\r\nOK\r\n", 8) == 0))
        return k;
    return scan_failf(s, p, k, "ASKING answered ");
}

/* --verify: one read's checks, counted in the tally once the read is accounted whole (a
 * read that breaks the protocol attributes none of its replies, checks included). */
#define MISMATCH_KEYS 10
typedef struct {
    long long checked, mismatches;
    int named;
    uint32_t key_at[MISMATCH_KEYS], key_len[MISMATCH_KEYS];
} Checks;

static inline void
check_value(const Pump *self, const Pending *request, const char *value, Py_ssize_t n,
            Checks *c)
{
    c->checked++;
    const char *key = self->keys + request->key_at;
    int good;
    const unsigned char *map = self->value_map;
    if (request->expect && map != NULL) { /* as the gateway stored the set's value */
        const unsigned char *head = (const unsigned char *)key + request->key_len;
        good = n >= EXACT_HEAD;
        for (int i = 0; good && i < EXACT_HEAD; i++)
            good = (unsigned char)value[i] == map[head[i]];
        good = good && (self->verify == VERIFY_TIMESTAMP
                            ? n == EXACT_HEAD
                            : verify_derived_mapped(key, request->key_len, head, value, n, map));
    }
    else if (request->expect) /* the set's value, as engine/verify.py compares it: exactly */
        good = n >= EXACT_HEAD && memcmp(value, key + request->key_len, EXACT_HEAD) == 0 &&
               (self->verify == VERIFY_TIMESTAMP ? n == EXACT_HEAD
                                                 : verify_derived(key, request->key_len, value, n));
    else
        good = self->verify == VERIFY_TIMESTAMP
                   ? verify_timestamp(value, n, self->window_low_ms, self->window_high_ms)
                   : verify_derived(key, request->key_len, value, n);
    if (good)
        return;
    c->mismatches++;
    if (c->named == MISMATCH_KEYS)
        return;
    for (int i = 0; i < c->named; i++) /* (each key once: a read may fail one many times) */
        if (c->key_len[i] == request->key_len &&
            memcmp(self->keys + c->key_at[i], key, request->key_len) == 0)
            return;
    c->key_at[c->named] = request->key_at;
    c->key_len[c->named++] = request->key_len;
}

/* Add a read's checks to the tally, with the keys of its mismatches that the tally does
 * not name yet (MISMATCH_KEYS at most); -1 with an exception. */
static int
checks_count(Pump *self, Tally *tally, const Checks *c)
{
    tally->verified += c->checked;
    tally->mismatches += c->mismatches;
    for (int i = 0; i < c->named; i++) {
        if (tally->mismatch_keys == NULL && (tally->mismatch_keys = PyList_New(0)) == NULL)
            return -1;
        PyObject *keys = tally->mismatch_keys;
        Py_ssize_t count = PyList_GET_SIZE(keys), j = 0;
        if (count == MISMATCH_KEYS)
            return 0;
        const char *key = self->keys + c->key_at[i];
        for (; j < count; j++) {
            PyObject *known = PyList_GET_ITEM(keys, j);
            if (PyBytes_GET_SIZE(known) == c->key_len[i] &&
                memcmp(PyBytes_AS_STRING(known), key, c->key_len[i]) == 0)
                break;
        }
        if (j < count)
            continue;
        PyObject *named = PyBytes_FromStringAndSize(key, c->key_len[i]);
        if (named == NULL || PyList_Append(keys, named) < 0) {
            Py_XDECREF(named);
            return -1;
        }
        Py_DECREF(named);
    }
    return 0;
}

static PyObject *
Pump_received(Pump *self, PyObject *data)
{
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "received() takes bytes");
        return NULL;
    }
    int status = pump_take(self, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
    return status < 0 ? NULL : PyLong_FromLong(status);
}

/* One read's bytes (received(), or the event loop's recv): PUMP_OK, PUMP_IDLE,
 * PUMP_ERROR, or -1 with an exception. */
static int
pump_take(Pump *self, const char *buf, Py_ssize_t n)
{
    if (self->busy)
        return reentrant("Pump.received()");
    if (self->error != Py_None) { /* NULL until __init__: checked off the common path */
        if (self->error == NULL)
            return not_initialized("Pump");
        return PUMP_ERROR;
    }
    /* The request this read's replies will send next, fetched while they are read. */
    Stream *stream = self->stream;
    if (stream->ops == NULL)
        for (Py_ssize_t at = stream->pos; at < stream->size && at < stream->pos + PREFETCH_AHEAD;
             at++)
            packed_prefetch(&stream->packed, at);
    long long now = monotonic_ns();
    Tally *tally = self->tally;
    if (now >= tally->next_cut_ns && tally->on_cut != Py_None) {
        PyObject *when = PyLong_FromLongLong(now);
        if (when == NULL)
            return -1;
        pump_python_calls++;
        PyObject *result = PyObject_CallOneArg(tally->on_cut, when);
        Py_DECREF(when);
        if (result == NULL)
            return -1;
        Py_DECREF(result);
    }
    tally->bytes_in += n;
    if (self->in_len) {
        if (grow(&self->in, &self->in_cap, self->in_len + n, 256, 1) < 0)
            return -1;
        memcpy(self->in + self->in_len, buf, (size_t)n);
        self->in_len += n;
        buf = self->in;
        n = self->in_len;
    }
    /* At most one reply per in-flight request: reserve for all of them. */
    if (i64s_reserve(&tally->ops, self->fifo_len) < 0 ||
        i64s_reserve(&tally->codes, self->fifo_len) < 0 ||
        i64s_reserve(&tally->latency, self->fifo_len) < 0 ||
        (self->open_loop && i64s_reserve(&tally->service, self->fifo_len) < 0))
        return -1;
    Py_ssize_t pos = 0, done = 0;
    /* Redis Cluster: guests answered (their slots are another connection's), requests
     * redirected (``redirects``: on_redirect's list), those of them drawn here. */
    Py_ssize_t guests = 0, moved = 0, moved_own = 0;
    PyObject *redirects = NULL;
    Scan scan = {.answered = self->answered};
    Checks checks = {0};
    while (pos < n) {
        Pending *request = self->fifo_len ? fifo_at(self, 0) : NULL;
        Kept *kept = self->cluster && request != NULL ? kept_at(self, 0) : NULL;
        if (kept != NULL && kept->asked) { /* ASKING's reply first */
            scan.skipped = 0;
            Py_ssize_t k = asking_reply(self->wire, buf + pos, n - pos, self->max_reply, &scan);
            if (k <= 0)
                break;
            kept->asked = scan.skipped;
            pos += k;
            continue;
        }
        Head head;
        if (request != NULL)
            head = request->op != self->rmw_op ? (Head){request->op, self->family[request->op],
                                                  request->tag, request->keys}
                   : self->half_code < 0 ? (Head){OP_GET, F_GET, request->tag, 0}
                                         : (Head){OP_SET, F_STORE, request->set_tag, 0};
        if (self->closing) {
            scan_fail(&scan, "bytes after a response that closed the connection");
            break;
        }
        scan.value_at = -1;
        scan.skipped = 0;
        Py_ssize_t k = scan_reply(self->wire, buf + pos, n - pos, request ? &head : NULL,
                                  self->max_reply, &scan);
        if (k <= 0)
            break;
        if (scan.skipped) { /* a push message: no request's reply */
            pos += k;
            continue;
        }
        Redirect redirect;
        if (kept != NULL && scan.code == K_ERROR && buf[pos] == '-' &&
            redirect_parse(buf + pos + 1, k - 3, &redirect)) {
            int own = kept->hops == 0;
            if (redirect_take(self, &redirect, &redirects) < 0) {
                unaccount(self, tally, done + moved, done);
                Py_XDECREF(redirects);
                self->in_len = 0;
                return -1;
            }
            moved++;
            moved_own += own;
            pos += k;
            continue;
        }
        self->closing = scan.closing;
        if ((scan.code & (FOLD_KINDS - 1)) == K_ERROR && tally->said == NULL)
            keep_said(tally, (int)request->op, buf + pos, k);
        if (self->verify && request->op == OP_GET && scan.value_at >= 0 &&
            (scan.code & (FOLD_KINDS - 1)) == K_HIT) {
            const char *value = buf + pos + scan.value_at;
            if (scan.value_chunked) { /* its data between chunk lines: joined first */
                if (grow(&self->joined, &self->joined_cap, scan.value_len + 1, 256, 1) < 0) {
                    unaccount(self, tally, done + moved, done);
                    Py_XDECREF(redirects);
                    self->in_len = 0;
                    return -1;
                }
                http_chunked_join(value, k - scan.value_at, self->joined);
                value = self->joined;
            }
            check_value(self, request, value, scan.value_len, &checks);
        }
        pos += k;
        if (request->op == self->rmw_op) {
            if (self->half_code < 0) { /* its get's reply: the set's completes it */
                self->half_code = scan.code;
                self->half_len = k;
                continue;
            }
            scan.code = rmw_fold(self->half_code, scan.code);
            k += self->half_len;
            self->half_code = -1;
        }
        guests += kept != NULL && kept->hops != 0;
        account(self, tally, request, scan.code, k, now);
        done++;
    }
    self->answered = scan.answered;
    if (scan.error != NULL) {
        /* The error quotes bytes of buf: build it before they may go. The redirects read
         * are not followed: their requests end with the rest. */
        int failed = set_error(self, &scan);
        self->in_len = 0;
        unaccount(self, tally, done + moved, done);
        Py_XDECREF(redirects);
        if (failed < 0)
            return -1;
        return PUMP_ERROR;
    }
    /* (before a send moves the keys the mismatches name) */
    if (checks.checked && checks_count(self, tally, &checks) < 0)
        return -1;
    self->stream->completed += done;
    /* Keep the incomplete rest for the next read. */
    Py_ssize_t rest = n - pos;
    if (rest) {
        if (buf == self->in)
            memmove(self->in, self->in + pos, (size_t)rest);
        else {
            if (grow(&self->in, &self->in_cap, rest, 256, 1) < 0)
                return -1;
            memcpy(self->in, buf + pos, (size_t)rest);
        }
    }
    self->in_len = rest;
    if (!done && !moved) /* (an rmw's get may have announced the close) */
        return self->closing ? PUMP_CLOSING : PUMP_OK;
    if (done && tally->fold && tally_fold(tally) < 0) {
        Py_XDECREF(redirects);
        return -1;
    }
    if (redirects != NULL) { /* sent on (the router may send here too: the read is done) */
        PyObject *result = NULL;
        if (self->on_redirect == NULL || self->on_redirect == Py_None)
            PyErr_SetString(PyExc_RuntimeError, "a cluster pump redirected with no on_redirect");
        else {
            pump_python_calls++;
            result = PyObject_CallOneArg(self->on_redirect, redirects);
        }
        Py_DECREF(redirects);
        if (result == NULL)
            return -1;
        Py_DECREF(result);
    }
    if (self->closing) /* the server closes after this reply: send nothing more here */
        return PUMP_CLOSING;
    if (self->open_loop) /* the dispatcher sends; the worker may be finished */
        return !tally->issuing || tally->budget == 0 ? PUMP_IDLE : PUMP_OK;
    /* A guest's slot is its first connection's; a request sent elsewhere freed its own.
     * None freed (guests answered only): the worker may be finished. */
    Py_ssize_t freed = done - guests + moved_own;
    if (freed == 0)
        return PUMP_IDLE;
    return pump_issue(self, freed);
}

PyDoc_STRVAR(Pump_data_received_doc,
"data_received(data) -> None\n\n"
"received(data) as a protocol's read callback, so that the event loop calls the pump\n"
"with no Python frame between: a non-zero status goes to ``on_stopped(status)``.");

static PyObject *
Pump_data_received(Pump *self, PyObject *data)
{
    PyObject *status = Pump_received(self, data);
    if (status == NULL)
        return NULL;
    long code = PyLong_AsLong(status);
    if (code == PUMP_OK || self->on_stopped == NULL || self->on_stopped == Py_None) {
        Py_DECREF(status);
        Py_RETURN_NONE;
    }
    pump_python_calls++;
    PyObject *result = PyObject_CallOneArg(self->on_stopped, status);
    Py_DECREF(status);
    if (result == NULL)
        return NULL;
    Py_DECREF(result);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(Pump_issue_doc,
"issue(n) -> int\n\n"
"Closed loop: send up to ``n`` requests in one write; 1 when none could be sent (not\n"
"issuing, the budget is spent, the stream has none now, or the pump is an open loop's),\n"
"else 0.");

static PyObject *
Pump_issue(Pump *self, PyObject *arg)
{
    if (pump_ready(self, "Pump.issue()") < 0)
        return NULL;
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n <= 0)
        return PyLong_FromLong(PUMP_OK);
    int status = pump_issue(self, n);
    if (status < 0)
        return NULL;
    return PyLong_FromLong(status);
}

PyDoc_STRVAR(Pump_issue_scheduled_doc,
"issue_scheduled(intended_ns) -> int\n\n"
"Open loop: send one request per intended time (a list of ints, monotonic ns) in one\n"
"write, whatever the pipeline holds (the dispatcher sized it); record each send's lag\n"
"behind its time and count it late beyond ``late_ns``. The budget is the dispatcher's to\n"
"draw down. Returns 0.");

static PyObject *
Pump_issue_scheduled(Pump *self, PyObject *intended)
{
    if (pump_ready(self, "Pump.issue_scheduled()") < 0)
        return NULL;
    if (!self->open_loop) {
        PyErr_SetString(PyExc_RuntimeError, "issue_scheduled() on a closed-loop pump");
        return NULL;
    }
    if (!PyList_Check(intended)) {
        PyErr_SetString(PyExc_TypeError, "issue_scheduled() takes a list of ints");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(intended);
    if (n && pump_send(self, n, intended, NULL) < 0)
        return NULL;
    return PyLong_FromLong(PUMP_OK);
}

PyDoc_STRVAR(Pump_oldest_doc,
"oldest_sent_ns() -> int | None\n\nWhen the oldest unanswered request was sent.");

static PyObject *
Pump_oldest_sent_ns(Pump *self, PyObject *unused)
{
    if (self->tally == NULL) {
        not_initialized("Pump");
        return NULL;
    }
    long long sent;
    if (!pump_oldest_sent((PyObject *)self, &sent))
        Py_RETURN_NONE;
    return PyLong_FromLongLong(sent);
}

PyDoc_STRVAR(Pump_expire_doc,
"expire(now, timeout_ns) -> (ops, late_by)\n\n"
"Remove the requests at the head sent ``timeout_ns`` or more before ``now``: their ops\n"
"(bytes), and how far behind its intended time each was sent (native int64 bytes; 0 in\n"
"a closed loop).");

static PyObject *
Pump_expire(Pump *self, PyObject *args)
{
    long long now, timeout_ns;
    if (pump_ready(self, "Pump.expire()") < 0)
        return NULL;
    if (!PyArg_ParseTuple(args, "LL", &now, &timeout_ns))
        return NULL;
    Py_ssize_t k = 0;
    while (k < self->fifo_len &&
           now - fifo_at(self, k)->sent_ns >= timeout_ns)
        k++;
    PyObject *ops = PyBytes_FromStringAndSize(NULL, k);
    PyObject *late_by =
        ops ? PyBytes_FromStringAndSize(NULL, k * (Py_ssize_t)sizeof(long long)) : NULL;
    if (late_by == NULL) {
        Py_XDECREF(ops);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        const Pending *request = fifo_at(self, i);
        long long behind = request->sent_ns - request->intended_ns;
        PyBytes_AS_STRING(ops)[i] = (char)request->op;
        memcpy(PyBytes_AS_STRING(late_by) + i * (Py_ssize_t)sizeof behind, &behind,
               sizeof behind);
    }
    if (k) {
        self->fifo_head = (self->fifo_head + k) % self->fifo_cap;
        self->fifo_len -= k;
        self->tally->inflight -= k;
        self->half_code = -1; /* (an rmw at the head, its get's reply read, went too) */
    }
    return Py_BuildValue("(NN)", ops, late_by);
}

PyDoc_STRVAR(Pump_send_guest_doc,
"send_guest(request, op, keys, key, sent_ns, intended_ns, hops, asking) -> None\n\n"
"Redis Cluster: send a request another connection's node redirected here, as it was\n"
"written there (``request``: on_redirect's item), after ASKING when ``asking`` (an ASK),\n"
"as a guest: its latency runs from ``intended_ns`` (``sent_ns`` in a closed loop), its\n"
"reply is its outcome here, and frees no pipeline slot here (its own went where it was\n"
"first sent); ``hops``: the times it was redirected, this one included. ``key``: a\n"
"--verify'd get's key (else None). Nothing is drawn from the stream or the budget.");

/* The bytes an ASK's guest is preceded by (protocols/resp.py's encode_asking). */
static const char ASKING[] = "*1\r\n$6\r\nASKING\r\n";

static PyObject *
Pump_send_guest(Pump *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"request", "op", "keys", "key", "sent_ns", "intended_ns",
                             "hops", "asking", NULL};
    Py_buffer request;
    int op, hops, asking;
    unsigned int keys;
    PyObject *key;
    long long sent_ns, intended_ns;
    if (pump_ready(self, "Pump.send_guest()") < 0)
        return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*iIOLLip", kwlist, &request, &op, &keys,
                                     &key, &sent_ns, &intended_ns, &hops, &asking))
        return NULL;
    PyObject *result = NULL;
    if (pump_ready(self, "Pump.send_guest()") < 0) /* (reading an int may run Python code) */
        goto done;
    if (!self->cluster || self->error != Py_None) {
        PyErr_SetString(PyExc_RuntimeError, self->cluster ? "send_guest() on a stopped pump"
                                                          : "send_guest() on a pump of no cluster");
        goto done;
    }
    if (op < 0 || op >= MAX_OPS || self->family[op] == F_NONE || hops < 1 || hops > 255 ||
        (key != Py_None && !PyBytes_Check(key)) || request.len <= 0) {
        PyErr_SetString(PyExc_ValueError,
                        "send_guest() takes a request, an op of the pump's, 1-255 hops, a key "
                        "of bytes or None");
        goto done;
    }
    Py_ssize_t extra = asking ? (Py_ssize_t)sizeof ASKING - 1 : 0;
    sent_compact(self);
    if (self->verify)
        keys_compact(self);
    Py_ssize_t sent_mark = self->sent_len, keys_mark = self->keys_len;
    uint32_t key_at = (uint32_t)self->keys_len, key_len = 0;
    Out o = {self->out, 0, self->out_cap};
    int failed = fifo_reserve(self, 1) < 0 || out_reserve(&o, extra + request.len) < 0 ||
                 sent_put(self, request.buf, request.len) < 0;
    self->out = o.p;
    self->out_cap = o.cap;
    if (!failed && self->verify && op == OP_GET && key != Py_None) {
        key_len = (uint32_t)PyBytes_GET_SIZE(key);
        failed = keys_put(self, PyBytes_AS_STRING(key), key_len) < 0;
    }
    if (failed) {
        self->sent_len = sent_mark;
        self->keys_len = keys_mark;
        goto done;
    }
    put(&o, ASKING, extra);
    put(&o, request.buf, request.len);
    PyObject *bytes = self->poller == NULL ? PyBytes_FromStringAndSize(o.p, o.len) : NULL;
    if (self->poller == NULL && bytes == NULL) {
        self->sent_len = sent_mark;
        self->keys_len = keys_mark;
        goto done;
    }
    Tally *tally = self->tally;
    *fifo_at(self, self->fifo_len) = (Pending){sent_ns, intended_ns, 0, 0, keys, key_at, key_len,
                                               (unsigned char)op, 0, 0};
    *kept_at(self, self->fifo_len) =
        (Kept){(uint32_t)sent_mark, (uint32_t)request.len, (unsigned char)hops, asking != 0};
    self->fifo_len++;
    tally->inflight++;
    tally->tx[op] += o.len;
    tally->bytes_out += o.len;
    if (self->poller != NULL) {
        poller_send(self->poller, self->slot, o.p, o.len);
        result = Py_NewRef(Py_None);
    }
    else {
        pump_python_calls++;
        result = PyObject_CallOneArg(self->write, bytes);
        Py_DECREF(bytes);
    }
done:
    PyBuffer_Release(&request);
    return result;
}

PyDoc_STRVAR(Pump_drop_doc,
"drop() -> bytes\n\n"
"Forget every request in flight and any buffered bytes; the ops that were in flight.");

static PyObject *
Pump_drop(Pump *self, PyObject *unused)
{
    if (pump_ready(self, "Pump.drop()") < 0)
        return NULL;
    PyObject *ops = PyBytes_FromStringAndSize(NULL, self->fifo_len);
    if (ops == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < self->fifo_len; i++)
        PyBytes_AS_STRING(ops)[i] = (char)fifo_at(self, i)->op;
    self->tally->inflight -= self->fifo_len;
    self->fifo_head = self->fifo_len = 0;
    self->in_len = 0;
    self->half_code = -1;
    return ops;
}

static PyMemberDef Pump_members[] = {
    {"error", T_OBJECT, offsetof(Pump, error), READONLY, "the error that stopped the pump"},
    {"on_redirect", T_OBJECT, offsetof(Pump, on_redirect), 0,
     "a cluster pump's callback of the requests a read's -MOVED and -ASK replies took out "
     "of its FIFO: a list of (kind, slot, host, port, op, keys, request, key, sent_ns, "
     "intended_ns, hops) (None: none)"},
    {"on_stopped", T_OBJECT, offsetof(Pump, on_stopped), 0,
     "data_received's callback of a non-zero status (None: none)"},
    {"inflight", T_PYSSIZET, offsetof(Pump, fifo_len), READONLY, "requests sent and not answered"},
    {NULL},
};

static PyMethodDef Pump_methods[] = {
    {"received", (PyCFunction)Pump_received, METH_O, Pump_received_doc},
    {"data_received", (PyCFunction)Pump_data_received, METH_O, Pump_data_received_doc},
    {"issue", (PyCFunction)Pump_issue, METH_O, Pump_issue_doc},
    {"issue_scheduled", (PyCFunction)Pump_issue_scheduled, METH_O, Pump_issue_scheduled_doc},
    {"oldest_sent_ns", (PyCFunction)Pump_oldest_sent_ns, METH_NOARGS, Pump_oldest_doc},
    {"expire", (PyCFunction)Pump_expire, METH_VARARGS, Pump_expire_doc},
    {"drop", (PyCFunction)Pump_drop, METH_NOARGS, Pump_drop_doc},
    {"send_guest", (PyCFunction)(void (*)(void))Pump_send_guest, METH_VARARGS | METH_KEYWORDS,
     Pump_send_guest_doc},
    {NULL},
};

static PyTypeObject PumpType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kvbench.engine._pump.Pump",
    .tp_doc = PyDoc_STR("Pump(tally, stream, write, protocol, families, max_reply, "
                        "open_loop=False, late_ns=0, verify=0, window_ms=None, exact=False, "
                        "ttl=-1): one connection's loop; ttl: its stores' own (-1: the "
                        "stream's)"),
    .tp_basicsize = sizeof(Pump),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Pump_init,
    .tp_dealloc = (destructor)Pump_dealloc,
    .tp_traverse = (traverseproc)Pump_traverse,
    .tp_clear = (inquiry)Pump_clear,
    .tp_members = Pump_members,
    .tp_methods = Pump_methods,
};

/* -- what the event loop (_pump_loop.c) asks of a pump ------------------------------------ */

int
pump_attach(PyObject *obj, Poller *poller, Py_ssize_t slot)
{
    if (!PyObject_TypeCheck(obj, &PumpType)) {
        PyErr_Format(PyExc_TypeError, "a connection's pump must be a Pump, not %.50s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    Pump *self = (Pump *)obj;
    if (pump_ready(self, "Poller.set_pump()") < 0)
        return -1;
    if (self->poller != NULL && (self->poller != poller || self->slot != slot)) {
        PyErr_SetString(PyExc_RuntimeError, "the pump sends on another connection already");
        return -1;
    }
    self->poller = poller;
    self->slot = slot;
    return 0;
}

void
pump_detach(PyObject *obj)
{
    ((Pump *)obj)->poller = NULL;
}

int
pump_feed(PyObject *obj, const char *buf, Py_ssize_t n)
{
    return pump_take((Pump *)obj, buf, n);
}

PyObject *
pump_on_stopped(PyObject *obj)
{
    return ((Pump *)obj)->on_stopped;
}

/* -- what the event loop's schedule (_pump_loop.c) asks of a pump and a tally ------------ */

int
pump_check_scheduled(PyObject *obj)
{
    if (!PyObject_TypeCheck(obj, &PumpType)) {
        PyErr_Format(PyExc_TypeError, "a lane's pump must be a Pump, not %.50s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (((Pump *)obj)->tally == NULL)
        return not_initialized("Pump");
    if (!((Pump *)obj)->open_loop) {
        PyErr_SetString(PyExc_ValueError, "a lane's pump must be an open loop's");
        return -1;
    }
    return 0;
}

Py_ssize_t
pump_inflight(PyObject *obj)
{
    return ((Pump *)obj)->fifo_len;
}

int
pump_oldest_sent(PyObject *obj, long long *sent_ns)
{
    Pump *self = (Pump *)obj;
    if (self->fifo_len == 0)
        return 0;
    *sent_ns = fifo_at(self, 0)->sent_ns;
    return 1;
}

int
pump_send_scheduled(PyObject *obj, Py_ssize_t n, const long long *times)
{
    Pump *self = (Pump *)obj;
    if (pump_ready(self, "Pump.issue_scheduled()") < 0)
        return -1;
    return pump_send(self, n, NULL, times) < 0 ? -1 : 0;
}

int
tally_check(PyObject *obj)
{
    if (!PyObject_TypeCheck(obj, &TallyType)) {
        PyErr_Format(PyExc_TypeError, "a schedule's tally must be a Tally, not %.50s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    return ((Tally *)obj)->on_cut == NULL ? not_initialized("Tally") : 0;
}

int
tally_issuing(PyObject *obj)
{
    return ((Tally *)obj)->issuing;
}

long long *
tally_budget(PyObject *obj)
{
    return &((Tally *)obj)->budget;
}

/* -- a scanner entry point for tests ---------------------------------------------------- */

PyDoc_STRVAR(scan_replies_doc,
"scan_replies(protocol, families, ops, data, max_reply, keys=b'') -> (codes, consumed, error)\n\n"
"Classify the replies in ``data`` answering ``ops`` (bytes, one op per request; ``keys``:\n"
"each request's key count, for multi-gets) as a Pump would, opaques numbered from 0: the\n"
"codes of the complete ones, the bytes they took, and the grammar error that stopped the\n"
"scan (or None; bytes after a reply that announced the connection's close stop it too).\n"
"For tests that compare with the Python codecs.");

static PyObject *
scan_replies(PyObject *module, PyObject *args)
{
    int protocol;
    Py_buffer families, ops, data, keys = {0};
    long long max;
    if (!PyArg_ParseTuple(args, "iy*y*y*L|y*", &protocol, &families, &ops, &data, &max, &keys))
        return NULL;
    const Wire *wire = wire_of(protocol);
    unsigned char family[MAX_OPS] = {0};
    for (Py_ssize_t i = 0; i < families.len && i < MAX_OPS; i++)
        family[i] = ((const unsigned char *)families.buf)[i] % F_COUNT;
    PyObject *codes = wire != NULL ? PyList_New(0) : NULL;
    Py_ssize_t pos = 0, i = 0;
    Scan scan = {.answered = UINT32_MAX};
    Tags tags = {0, 0, 0};
    Head head = {0};
    const char *p = data.buf;
    int closing = 0;
    while (codes != NULL && pos < data.len) {
        if (closing) {
            scan_fail(&scan, "bytes after a response that closed the connection");
            break;
        }
        if (i < ops.len) { /* request i, tagged as the encoder tags it */
            int op = ((const unsigned char *)ops.buf)[i];
            uint32_t count = i < keys.len ? ((const unsigned char *)keys.buf)[i] : 0;
            tags.tag = 0;
            tags.keys = count;
            if (wire->tag != NULL)
                wire->tag(op, count, &tags);
            head = (Head){op, op < MAX_OPS ? family[op] : F_NONE, tags.tag, tags.keys};
        }
        scan.skipped = 0;
        Py_ssize_t k = scan_reply(wire, p + pos, data.len - pos, i < ops.len ? &head : NULL,
                                  max, &scan);
        if (k <= 0)
            break;
        if (scan.skipped) { /* a push message: no request's reply */
            pos += k;
            continue;
        }
        PyObject *code = PyLong_FromLongLong(scan.code);
        if (code == NULL || PyList_Append(codes, code) < 0)
            Py_CLEAR(codes);
        Py_XDECREF(code);
        pos += k;
        i++;
        closing = scan.closing;
    }
    PyObject *error = Py_None;
    if (codes != NULL && scan.error != NULL) /* before data, whose bytes it quotes, goes */
        error = scan_error(&scan);
    else
        Py_INCREF(error);
    PyBuffer_Release(&families);
    PyBuffer_Release(&ops);
    PyBuffer_Release(&data);
    if (keys.obj != NULL)
        PyBuffer_Release(&keys);
    if (codes == NULL || error == NULL) {
        Py_XDECREF(codes);
        Py_XDECREF(error);
        return NULL;
    }
    return Py_BuildValue("(NnN)", codes, pos, error);
}

PyDoc_STRVAR(hdr_fold_doc,
"hdr_fold(values) -> (indexes, counts, total, min, max, sum, out_of_range) | None\n\n"
"Record ``values`` (native int64: bytes, an array('q'), a numpy int64 array) into a fresh\n"
"histogram as a folding Tally records a reply's latency: Histogram's layout, clamping and\n"
"scalars. For tests that hold the two together.");

static PyObject *
hdr_fold(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    Hdr h = {0};
    PyObject *out = NULL;
    if (view.len % (Py_ssize_t)sizeof(long long)) {
        PyErr_SetString(PyExc_ValueError, "hdr_fold() takes native int64 values");
        goto done;
    }
    const char *p = view.buf;
    for (Py_ssize_t i = 0; i < view.len; i += (Py_ssize_t)sizeof(long long)) {
        long long v;
        memcpy(&v, p + i, sizeof v);
        if (hdr_record(&h, v) < 0)
            goto done;
    }
    out = hdr_take(&h);
done:
    hdr_free(&h);
    PyBuffer_Release(&view);
    return out;
}

PyDoc_STRVAR(set_clock_doc,
"_set_clock(ns) -> None\n\n"
"For tests: the pumps read ``ns`` as the time from now on (replies' latencies, sends'\n"
"lags); None: the monotonic clock again.");

static PyObject *
set_clock(PyObject *module, PyObject *arg)
{
    long long ns = -1;
    if (arg != Py_None) {
        ns = PyLong_AsLongLong(arg);
        if (ns == -1 && PyErr_Occurred())
            return NULL;
        if (ns < 0) {
            PyErr_SetString(PyExc_ValueError, "a clock reads from 0");
            return NULL;
        }
    }
    frozen_ns = ns;
    Py_RETURN_NONE;
}

/* -- module ----------------------------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"encode", encode, METH_VARARGS, encode_doc},
    {"encode_packed", encode_packed, METH_VARARGS, encode_packed_doc},
    {"scan_replies", scan_replies, METH_VARARGS, scan_replies_doc},
    {"hdr_fold", hdr_fold, METH_O, hdr_fold_doc},
    {"_set_clock", set_clock, METH_O, set_clock_doc},
    {"check_value", verify_check_value, METH_VARARGS,
     PyDoc_STR("check_value(key, value) -> bool: workload.verify.check_value in C.")},
    {"derive_value", verify_derive_value, METH_VARARGS,
     PyDoc_STR("derive_value(key, version, size) -> bytes: workload.verify.derive_value in C.")},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kvbench.engine._pump",
    .m_doc = PyDoc_STR("The compiled hot path, closed and open loop (memcached text, binary, "
                       "meta; RESP2, RESP3)."),
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__pump(void)
{
    if (PyType_Ready(&TallyType) < 0 || PyType_Ready(&StreamType) < 0 ||
        PyType_Ready(&PumpType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (loop_add_types(m) < 0)
        goto error;
    struct {
        const char *name;
        long value;
    } constants[] = {
        {"TEXT", P_TEXT}, {"RESP2", P_RESP2}, {"BINARY", P_BINARY}, {"META", P_META},
        {"RESP3", P_RESP3}, {"HTTP", P_HTTP},
        {"F_GET", F_GET}, {"F_MGET", F_MGET},
        {"F_STORE", F_STORE}, {"F_DELETE", F_DELETE}, {"F_ARITH", F_ARITH},
        {"F_APPEND", F_APPEND}, {"F_COMMAND", F_COMMAND},
        {"K_HIT", K_HIT}, {"K_MISS", K_MISS}, {"K_STORED", K_STORED},
        {"K_NOT_STORED", K_NOT_STORED}, {"K_EXISTS", K_EXISTS}, {"K_NOT_FOUND", K_NOT_FOUND},
        {"K_DELETED", K_DELETED}, {"K_OK", K_OK}, {"K_VALUE", K_VALUE},
        {"K_ERROR_REPLY", K_ERROR}, {"KEYS_SHIFT", KEYS_SHIFT}, {"MAX_OPS", MAX_OPS},
        {"OP_RMW", OP_RMW}, {"OP_COMMAND", OP_COMMAND}, {"COMMAND_BASE", COMMAND_BASE},
        {"HDR_SUB_BUCKET_HALF_COUNT_MAGNITUDE", HDR_HALF_MAGNITUDE},
        {"HDR_COUNTS_LEN", HDR_COUNTS_LEN},
        {"HDR_HIGHEST_TRACKABLE_NS", HDR_HIGHEST}, /* (a long is 64 bits here: Linux) */
    };
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++)
        if (PyModule_AddIntConstant(m, constants[i].name, constants[i].value) < 0)
            goto error;
    PyObject *types[] = {(PyObject *)&TallyType, (PyObject *)&StreamType,
                         (PyObject *)&PumpType};
    const char *names[] = {"Tally", "Stream", "Pump"};
    for (int i = 0; i < 3; i++) {
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, names[i], types[i]) < 0) {
            Py_DECREF(types[i]);
            goto error;
        }
    }
    return m;
error:
    Py_DECREF(m);
    return NULL;
}
