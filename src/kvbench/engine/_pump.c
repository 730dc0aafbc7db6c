/* kvbench.engine._pump: the compiled closed-loop hot path of one connection.
 *
 * At pipeline 1 every op is one read, one write and one event-loop callback; the Python
 * driver spent about 5 us per op around them (parse, account, encode, FIFO), more than
 * the syscalls. This module does that work in C for memcached text and RESP2:
 *
 *   Pump.received(data)  one read: classify every complete reply (the Python codecs'
 *                        read_kinds codes, same values), account op / code / latency
 *                        into the shared Tally, then send as many new requests, drawn
 *                        from the server's Stream (the workload's chunks of op, key and
 *                        value) and encoded here, in one write.
 *
 * Replies are classified with the grammar of memcached's protocol.txt and the RESP2
 * specification, requests written as the codecs write them, for the ops a workload mix
 * sends (get, set, delete, incr/decr, multi-get). The Python codecs remain the reference:
 * tests compare replies' codes and requests' bytes with theirs.
 *
 * Sans-IO like the codecs: no sockets here; the transport's write is a callable.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>
#include <time.h>

#if PY_VERSION_HEX < 0x030C0000
/* Python 3.12's one-object exception API, on 3.11. */
static PyObject *
PyErr_GetRaisedException(void)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (type == NULL)
        return NULL;
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL)
        PyException_SetTraceback(value, traceback);
    Py_DECREF(type);
    Py_XDECREF(traceback);
    return value;
}

static void
PyErr_SetRaisedException(PyObject *exc)
{
    if (exc == NULL)
        return;
    PyObject *type = (PyObject *)Py_TYPE(exc);
    Py_INCREF(type);
    PyErr_Restore(type, exc, PyException_GetTraceback(exc));
}
#endif

/* protocols.base.ReplyKind values (a test compares them with the enum). */
enum {
    K_HIT = 1,
    K_MISS = 2,
    K_STORED = 3,
    K_NOT_STORED = 4,
    K_EXISTS = 5,
    K_NOT_FOUND = 6,
    K_DELETED = 7,
    K_VALUE = 10,
    K_ERROR = 20,
};
#define KEYS_SHIFT 8

/* What a reply must look like, per op: the engine passes a table op -> family. */
enum { F_NONE = 0, F_GET, F_MGET, F_STORE, F_DELETE, F_ARITH, F_COUNT };
enum { P_TEXT = 1, P_RESP2 = 2 };

#define MAX_OPS 64
#define MAX_SIZE_DIGITS 18

/* Scan results: > 0 bytes consumed; 0 incomplete; < 0 a grammar error (message set). */
#define NEED 0
#define BAD (-1)

static long long
monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* -- byte helpers -------------------------------------------------------------------- */

/* Index of the first CRLF in p[0:n], or -1. */
static Py_ssize_t
find_crlf(const char *p, Py_ssize_t n)
{
    const char *q = p, *end = p + n;
    while (q < end && (q = memchr(q, '\r', (size_t)(end - q))) != NULL) {
        if (q + 1 >= end)
            return -1;
        if (q[1] == '\n')
            return q - p;
        q++;
    }
    return -1;
}

static int
is_word(const char *p, Py_ssize_t n, const char *word)
{
    size_t len = strlen(word);
    return (size_t)n == len && memcmp(p, word, len) == 0;
}

static int
starts(const char *p, Py_ssize_t n, const char *prefix)
{
    size_t len = strlen(prefix);
    return (size_t)n >= len && memcmp(p, prefix, len) == 0;
}

static int
all_digits(const char *p, Py_ssize_t n)
{
    if (n <= 0)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return 0;
    return 1;
}

/* memcached's error lines (protocol.txt "Error strings"). */
static int
is_error_line(const char *p, Py_ssize_t n)
{
    return is_word(p, n, "ERROR") || is_word(p, n, "CLIENT_ERROR") ||
           is_word(p, n, "SERVER_ERROR") || starts(p, n, "ERROR ") ||
           starts(p, n, "CLIENT_ERROR ") || starts(p, n, "SERVER_ERROR ");
}

/* A scan's outcome for one reply. */
typedef struct {
    long long code;       /* kind | keys << KEYS_SHIFT */
    const char *error;    /* set when the scan returns BAD (ASCII) */
    char detail[96];      /* formatted error text when error == detail */
    const char *quote;    /* reply bytes the error quotes after ``error`` (NULL: none) */
    Py_ssize_t quote_len;
} Scan;

/* The bytes of a reply an error message quotes at most: the Python codecs' ``[:64]``. */
#define QUOTE_MAX 64

static Py_ssize_t
fail(Scan *s, const char *message)
{
    s->error = message;
    return BAD;
}

/* A line that answers nothing: quoted as the codec quotes it (``{line[:64]!r}``). The
 * bytes are the server's, so they are only escaped when the error is built (scan_error),
 * never decoded: this costs nothing until a reply is wrong. */
static Py_ssize_t
fail_line(Scan *s, const char *what, const char *line, Py_ssize_t n)
{
    PyOS_snprintf(s->detail, sizeof s->detail, "unexpected reply to %s: ", what);
    s->error = s->detail;
    s->quote = line;
    s->quote_len = n < QUOTE_MAX ? n : QUOTE_MAX;
    return BAD;
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

/* -- memcached text replies ---------------------------------------------------------- */

/* One status line at p: its length without CRLF in *len, or NEED / BAD (too long). */
static Py_ssize_t
status_line(const char *p, Py_ssize_t n, long long max, Py_ssize_t *len, Scan *s)
{
    Py_ssize_t eol = find_crlf(p, n);
    if (eol < 0) {
        if (n > max)
            return fail(s, "reply line longer than the reply bound");
        return NEED;
    }
    *len = eol;
    return eol + 2;
}

/* The byte count of a VALUE header's fields ("key flags bytes [cas]"), or -1. */
static long long
value_size(const char *p, Py_ssize_t n)
{
    const char *f[5];
    Py_ssize_t len[5];
    int count = 0;
    const char *start = p, *end = p + n;
    for (const char *q = p;; q++) {
        if (q == end || *q == ' ') {
            if (count == 5)
                return -1;
            f[count] = start;
            len[count] = q - start;
            count++;
            if (q == end)
                break;
            start = q + 1;
        }
    }
    if (count != 3 && count != 4)
        return -1;
    if (!all_digits(f[1], len[1]) || !all_digits(f[2], len[2]) || len[2] > MAX_SIZE_DIGITS)
        return -1;
    if (count == 4 && !all_digits(f[3], len[3]))
        return -1;
    long long size = 0;
    for (Py_ssize_t i = 0; i < len[2]; i++)
        size = size * 10 + (f[2][i] - '0');
    return size;
}

/* One VALUE block at p ("VALUE k f b [c]\r\n<data>"): the offset just past <data> in
 * *block_end, NEED, or BAD. Checks the bound on what the reply will take (``before`` bytes
 * of it precede p, ``tail`` follow the block). */
static Py_ssize_t
value_block(const char *p, Py_ssize_t n, long long max, Py_ssize_t before, Py_ssize_t tail,
            Py_ssize_t *block_end, Scan *s)
{
    Py_ssize_t eol = find_crlf(p, n);
    if (eol < 0) {
        if (before + n > max)
            return fail(s, "get reply larger than the reply bound");
        return NEED;
    }
    long long size = value_size(p + 6, eol - 6);
    if (size < 0)
        return fail(s, "bad VALUE header");
    long long end = eol + 2 + size;
    if (before + end + tail > max)
        return fail(s, "get reply larger than the reply bound");
    *block_end = (Py_ssize_t)end;
    return 1;
}

static Py_ssize_t
text_status(const char *p, Py_ssize_t n, long long max, int family, Scan *s)
{
    static const char *const what[F_COUNT] = {
        "?", "get", "get", "a storage command", "delete", "incr/decr"};
    Py_ssize_t len;
    Py_ssize_t r = status_line(p, n, max, &len, s);
    if (r <= 0)
        return r;
    switch (family) {
    case F_STORE:
        if (is_word(p, len, "STORED")) s->code = K_STORED;
        else if (is_word(p, len, "NOT_STORED")) s->code = K_NOT_STORED;
        else if (is_word(p, len, "EXISTS")) s->code = K_EXISTS;
        else if (is_word(p, len, "NOT_FOUND")) s->code = K_NOT_FOUND;
        else goto other;
        return r;
    case F_DELETE:
        if (is_word(p, len, "DELETED")) s->code = K_DELETED;
        else if (is_word(p, len, "NOT_FOUND")) s->code = K_NOT_FOUND;
        else goto other;
        return r;
    case F_ARITH:
        if (all_digits(p, len)) {
            if (r > max)
                return fail(s, "incr/decr reply longer than the reply bound");
            s->code = K_VALUE;
        }
        else if (is_word(p, len, "NOT_FOUND")) s->code = K_NOT_FOUND;
        else goto other;
        return r;
    default:
        goto other;
    }
other:
    if (is_error_line(p, len)) {
        if (r > max)
            return fail(s, "error line longer than the reply bound");
        s->code = K_ERROR;
        return r;
    }
    return fail_line(s, what[family], p, len);
}

static Py_ssize_t
text_get(const char *p, Py_ssize_t n, long long max, Scan *s)
{
    if (starts(p, n, "VALUE ")) {
        Py_ssize_t end;
        Py_ssize_t r = value_block(p, n, max, 0, 7, &end, s);
        if (r <= 0)
            return r;
        if (n < end + 7) {
            /* Fail as soon as what follows the block cannot become CRLF END CRLF. */
            if (n > end && memcmp(p + end, "\r\nEND\r\n", (size_t)(n - end)) != 0)
                return fail(s, "get: data block not followed by CRLF END CRLF");
            return NEED;
        }
        if (memcmp(p + end, "\r\nEND\r\n", 7) != 0)
            return fail(s, "get: data block not followed by CRLF END CRLF");
        s->code = K_HIT | 1 << KEYS_SHIFT;
        return end + 7;
    }
    if (starts(p, n, "END\r\n")) {
        s->code = K_MISS;
        return 5;
    }
    return text_status(p, n, max, F_GET, s);
}

static Py_ssize_t
text_mget(const char *p, Py_ssize_t n, long long max, Scan *s)
{
    long long hits = 0;
    Py_ssize_t pos = 0;
    for (;;) {
        const char *q = p + pos;
        Py_ssize_t left = n - pos;
        if (starts(q, left, "VALUE ")) {
            Py_ssize_t end;
            Py_ssize_t r = value_block(q, left, max, pos, 2 + 5, &end, s);
            if (r <= 0)
                return r;
            if (left < end + 2)
                return NEED;
            if (memcmp(q + end, "\r\n", 2) != 0)
                return fail(s, "get: data block not followed by CRLF");
            hits++;
            pos += end + 2;
            continue;
        }
        if (starts(q, left, "END\r\n")) {
            s->code = hits ? (K_HIT | hits << KEYS_SHIFT) : K_MISS;
            return pos + 5;
        }
        /* memcached can fail part way through a multi-get (out of memory, bad key). */
        Py_ssize_t r = text_status(q, left, max, F_MGET, s);
        if (r <= 0)
            return r;
        s->code = K_ERROR | hits << KEYS_SHIFT;
        return pos + r;
    }
}

static Py_ssize_t
scan_text(const char *p, Py_ssize_t n, int family, long long max, Scan *s)
{
    switch (family) {
    case F_GET:
        return text_get(p, n, max, s);
    case F_MGET:
        return text_mget(p, n, max, s);
    default:
        return text_status(p, n, max, family, s);
    }
}

/* -- RESP2 replies ------------------------------------------------------------------- */

/* A signed decimal line at p (after the type byte): value in *v, or -1 if malformed.
 * RESP numbers are signed 64-bit, and the grammar is hiredis's string2ll (what the Python
 * codec parses with): "0", or an optional '-' and digits without a leading zero; anything
 * outside [LLONG_MIN, LLONG_MAX] is malformed. */
#define INT64_DIGITS 19

static int
parse_ll(const char *p, Py_ssize_t n, long long *v)
{
    if (n == 1 && p[0] == '0') {
        *v = 0;
        return 0;
    }
    int negative = n > 0 && p[0] == '-';
    p += negative;
    n -= negative;
    if (n <= 0 || n > INT64_DIGITS || p[0] < '1' || p[0] > '9' || !all_digits(p, n))
        return -1;
    unsigned long long x = 0; /* 19 digits fit: < 10^19 < 2^64 */
    for (Py_ssize_t i = 0; i < n; i++)
        x = x * 10 + (unsigned long long)(p[i] - '0');
    if (x > (unsigned long long)LLONG_MAX + negative)
        return -1;
    *v = negative ? (long long)(0ULL - x) : (long long)x;
    return 0;
}

/* hiredis's bound on an array's declared length (REDIS_READER_MAX_ARRAY_ELEMENTS). */
#define MAX_ARRAY_ELEMENTS 4294967295LL

/* One RESP2 item that is not an array: its type byte in *type, for '$' the length in *len
 * (-1 null), for ':' the value in *len. Returns consumed, NEED or BAD. '_' (RESP3 null)
 * reads as a null bulk string. As in hiredis, an unknown type byte fails at once, and a
 * simple string or error may hold no CR or LF. */
static Py_ssize_t
resp_item(const char *p, Py_ssize_t n, long long max, char *type, long long *len, Scan *s)
{
    if (n < 1)
        return NEED;
    if (memchr("+-:_$*", p[0], 6) == NULL)
        return fail(s, "RESP protocol error: unknown reply type");
    Py_ssize_t eol = find_crlf(p, n);
    if (eol < 0)
        return n > max ? fail(s, "RESP reply larger than the reply bound") : NEED;
    *type = p[0];
    switch (p[0]) {
    case '+':
    case '-':
        if (memchr(p, '\r', (size_t)eol) != NULL || memchr(p, '\n', (size_t)eol) != NULL)
            return fail(s, "RESP protocol error: CR or LF in a simple string");
        return eol + 2;
    case ':':
        if (parse_ll(p + 1, eol - 1, len) < 0)
            return fail(s, "RESP protocol error: bad integer");
        return eol + 2;
    case '_':
        if (eol != 1)
            return fail(s, "RESP protocol error: bad null");
        *type = '$';
        *len = -1;
        return eol + 2;
    case '$':
        if (parse_ll(p + 1, eol - 1, len) < 0 || *len < -1)
            return fail(s, "RESP protocol error: bad bulk string length");
        if (*len == -1)
            return eol + 2;
        /* Bounded before use, written so that no length can overflow the sum. */
        if (*len > max - (eol + 4))
            return fail(s, "RESP reply larger than the reply bound");
        if (n < eol + 2 + *len + 2)
            return NEED;
        if (memcmp(p + eol + 2 + *len, "\r\n", 2) != 0)
            return fail(s, "RESP protocol error: bulk string not followed by CRLF");
        return eol + 2 + (Py_ssize_t)*len + 2;
    default: /* '*' */
        if (parse_ll(p + 1, eol - 1, len) < 0 || *len < -1 || *len > MAX_ARRAY_ELEMENTS)
            return fail(s, "RESP protocol error: bad array length");
        return eol + 2;
    }
}

static Py_ssize_t
scan_resp2(const char *p, Py_ssize_t n, int family, long long max, Scan *s)
{
    static const char *const what[F_COUNT] = {"?", "GET", "MGET", "SET", "DEL", "INCR/DECR"};
    char type;
    long long len = 0;
    Py_ssize_t r = resp_item(p, n, max, &type, &len, s);
    if (r <= 0)
        return r;
    if (type == '-') {
        if (r > max)
            return fail(s, "RESP error reply larger than the reply bound");
        s->code = K_ERROR;
        return r;
    }
    int null = (type == '$' || type == '*') && len == -1;
    switch (family) {
    case F_GET:
        if (type == '$' || type == '+') {
            s->code = null ? K_MISS : (K_HIT | 1 << KEYS_SHIFT);
            return r;
        }
        if (null) {
            s->code = K_MISS;
            return r;
        }
        break;
    case F_STORE:
        if (null) {
            s->code = K_NOT_STORED;
            return r;
        }
        if ((type == '+' && r == 5 && memcmp(p, "+OK", 3) == 0) ||
            (type == '$' && len == 2 && memcmp(p + r - 4, "OK", 2) == 0)) {
            s->code = K_STORED;
            return r;
        }
        break;
    case F_DELETE:
        if (type == ':') {
            s->code = len ? K_DELETED : K_NOT_FOUND;
            return r;
        }
        break;
    case F_ARITH:
        if (type == ':') {
            s->code = K_VALUE;
            return r;
        }
        break;
    case F_MGET:
        if (type == '*' && len >= 0) {
            long long hits = 0;
            Py_ssize_t pos = r;
            for (long long i = 0; i < len; i++) {
                char item_type;
                long long item_len = 0;
                Py_ssize_t k = resp_item(p + pos, n - pos, max - pos, &item_type, &item_len, s);
                if (k == NEED && n > max) /* complete elements of an array that never ends */
                    return fail(s, "RESP reply larger than the reply bound");
                if (k <= 0)
                    return k;
                if (item_type == '$' || item_type == '+')
                    hits += !(item_type == '$' && item_len == -1);
                else if (!(item_type == '*' && item_len == -1))
                    return fail(s, "an MGET element is not a bulk string or null");
                pos += k;
            }
            s->code = hits ? (K_HIT | hits << KEYS_SHIFT) : K_MISS;
            return pos;
        }
        break;
    }
    PyOS_snprintf(s->detail, sizeof s->detail, "a reply of type %c cannot answer %s", type,
                  what[family]);
    s->error = s->detail;
    return BAD;
}

static Py_ssize_t
scan_reply(int protocol, const char *p, Py_ssize_t n, int family, long long max, Scan *s)
{
    if (family == F_NONE)
        return fail(s, "no compiled scanner for this op");
    return protocol == P_TEXT ? scan_text(p, n, family, max, s) : scan_resp2(p, n, family, max, s);
}

/* -- requests ------------------------------------------------------------------------ */

/* Requests are written byte for byte as the Python codecs' encode_many writes them (tests
 * compare the two): memcached text ("get k", "set k <flags> <ttl> <bytes>" + block,
 * "delete k", "incr k 1", "decr k 1", "get k1 k2 ...") and RESP arrays of bulk strings
 * (GET, SET [EX ttl], DEL, INCR, DECR, MGET). Op numbers are protocols.base.Op's. */
enum { OP_GET = 0, OP_SET = 1, OP_DELETE = 2, OP_INCR = 3, OP_DECR = 4, OP_MGET = 5 };

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Out;

static int
out_reserve(Out *o, Py_ssize_t more)
{
    if (o->len + more <= o->cap)
        return 0;
    Py_ssize_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + more)
        cap *= 2;
    char *p = PyMem_Realloc(o->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

/* Appends: callers reserve first (out_reserve), so these never fail. */
static void
put(Out *o, const void *src, Py_ssize_t n)
{
    memcpy(o->p + o->len, src, (size_t)n);
    o->len += n;
}

static void
put_ll(Out *o, long long v)
{
    char digits[24];
    int i = sizeof digits;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        digits[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        digits[--i] = '-';
    put(o, digits + i, (Py_ssize_t)sizeof digits - i);
}

#define PUT_LITERAL(o, s) put((o), (s), (Py_ssize_t)sizeof(s) - 1)

/* The bytes of a key or value: bytes, bytearray or a contiguous memoryview. */
static int
view_of(PyObject *obj, const char **p, Py_ssize_t *n)
{
    if (PyBytes_Check(obj)) {
        *p = PyBytes_AS_STRING(obj);
        *n = PyBytes_GET_SIZE(obj);
        return 0;
    }
    if (PyMemoryView_Check(obj)) {
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

/* A multi-get's keys: a tuple or list of bytes-like keys. */
static int
keys_of(PyObject *obj, PyObject ***items, Py_ssize_t *n)
{
    if (PyTuple_Check(obj)) {
        *items = &PyTuple_GET_ITEM(obj, 0);
        *n = PyTuple_GET_SIZE(obj);
        return 0;
    }
    if (PyList_Check(obj)) {
        *items = &PyList_GET_ITEM(obj, 0);
        *n = PyList_GET_SIZE(obj);
        return 0;
    }
    PyErr_SetString(PyExc_TypeError, "a multi-get's keys must be a tuple or list");
    return -1;
}

static void
put_bulk(Out *o, const char *p, Py_ssize_t n)
{
    PUT_LITERAL(o, "$");
    put_ll(o, n);
    PUT_LITERAL(o, "\r\n");
    put(o, p, n);
    PUT_LITERAL(o, "\r\n");
}

typedef struct {
    int protocol;
    long long ttl, flags;
    char ttl_digits[24]; /* scratch for the ttl's decimal form */
} Encoding;

/* Append one request; -1 with an exception for an op there is no compiled form of. */
static int
encode_request(Encoding *e, int op, PyObject *key, PyObject *value, Out *o)
{
    const char *k, *v = NULL;
    Py_ssize_t kn = 0, vn = 0;
    if (op == OP_MGET) {
        PyObject **items;
        Py_ssize_t count, total = 0;
        if (keys_of(key, &items, &count) < 0)
            return -1;
        for (Py_ssize_t i = 0; i < count; i++) {
            if (view_of(items[i], &k, &kn) < 0)
                return -1;
            total += kn + 32;
        }
        if (out_reserve(o, total + 32) < 0)
            return -1;
        if (e->protocol == P_TEXT)
            PUT_LITERAL(o, "get");
        else {
            PUT_LITERAL(o, "*");
            put_ll(o, count + 1);
            PUT_LITERAL(o, "\r\n$4\r\nMGET\r\n");
        }
        for (Py_ssize_t i = 0; i < count; i++) {
            view_of(items[i], &k, &kn);
            if (e->protocol == P_TEXT) {
                PUT_LITERAL(o, " ");
                put(o, k, kn);
            }
            else
                put_bulk(o, k, kn);
        }
        if (e->protocol == P_TEXT)
            PUT_LITERAL(o, "\r\n");
        return 0;
    }
    if (view_of(key, &k, &kn) < 0)
        return -1;
    if (op == OP_SET && view_of(value, &v, &vn) < 0)
        return -1;
    if (out_reserve(o, kn + vn + 128) < 0)
        return -1;
    if (e->protocol == P_TEXT) {
        switch (op) {
        case OP_GET:
            PUT_LITERAL(o, "get ");
            break;
        case OP_SET:
            PUT_LITERAL(o, "set ");
            put(o, k, kn);
            PUT_LITERAL(o, " ");
            put_ll(o, e->flags);
            PUT_LITERAL(o, " ");
            put_ll(o, e->ttl);
            PUT_LITERAL(o, " ");
            put_ll(o, vn);
            PUT_LITERAL(o, "\r\n");
            put(o, v, vn);
            PUT_LITERAL(o, "\r\n");
            return 0;
        case OP_DELETE:
            PUT_LITERAL(o, "delete ");
            break;
        case OP_INCR:
        case OP_DECR:
            if (op == OP_INCR)
                PUT_LITERAL(o, "incr ");
            else
                PUT_LITERAL(o, "decr ");
            put(o, k, kn);
            PUT_LITERAL(o, " 1\r\n");
            return 0;
        default:
            goto unsupported;
        }
        put(o, k, kn);
        PUT_LITERAL(o, "\r\n");
        return 0;
    }
    switch (op) {
    case OP_GET:
        PUT_LITERAL(o, "*2\r\n$3\r\nGET\r\n");
        break;
    case OP_SET:
        if (e->ttl) {
            Out ttl = {e->ttl_digits, 0, sizeof e->ttl_digits};
            put_ll(&ttl, e->ttl);
            PUT_LITERAL(o, "*5\r\n$3\r\nSET\r\n");
            put_bulk(o, k, kn);
            put_bulk(o, v, vn);
            PUT_LITERAL(o, "$2\r\nEX\r\n");
            put_bulk(o, ttl.p, ttl.len);
            return 0;
        }
        PUT_LITERAL(o, "*3\r\n$3\r\nSET\r\n");
        put_bulk(o, k, kn);
        put_bulk(o, v, vn);
        return 0;
    case OP_DELETE:
        PUT_LITERAL(o, "*2\r\n$3\r\nDEL\r\n");
        break;
    case OP_INCR:
        PUT_LITERAL(o, "*2\r\n$4\r\nINCR\r\n");
        break;
    case OP_DECR:
        PUT_LITERAL(o, "*2\r\n$4\r\nDECR\r\n");
        break;
    default:
        goto unsupported;
    }
    put_bulk(o, k, kn);
    return 0;
unsupported:
    PyErr_Format(PyExc_ValueError, "op %d has no compiled encoding", op);
    return -1;
}

static int
encoding_from(int protocol, long long ttl, long long flags, Encoding *e)
{
    if (protocol != P_TEXT && protocol != P_RESP2) {
        PyErr_Format(PyExc_ValueError, "unknown protocol %d", protocol);
        return -1;
    }
    e->protocol = protocol;
    e->ttl = ttl;
    e->flags = flags;
    return 0;
}

PyDoc_STRVAR(encode_doc,
"encode(protocol, ttl, flags, ops, keys, values, start, stop) -> bytes\n\n"
"Requests ``start`` to ``stop`` as a Stream writes them (for tests and benchmarks).");

static PyObject *
encode(PyObject *module, PyObject *args)
{
    int protocol;
    long long ttl, flags;
    PyObject *ops, *keys, *values;
    Py_ssize_t start, stop;
    Encoding e;
    if (!PyArg_ParseTuple(args, "iLLO!O!O!nn", &protocol, &ttl, &flags, &PyList_Type, &ops,
                          &PyList_Type, &keys, &PyList_Type, &values, &start, &stop) ||
        encoding_from(protocol, ttl, flags, &e) < 0)
        return NULL;
    if (start < 0 || stop > PyList_GET_SIZE(ops) || stop > PyList_GET_SIZE(keys) ||
        stop > PyList_GET_SIZE(values)) {
        PyErr_SetString(PyExc_IndexError, "start/stop outside the lists");
        return NULL;
    }
    Out o = {NULL, 0, 0};
    for (Py_ssize_t i = start; i < stop; i++) {
        long op = PyLong_AsLong(PyList_GET_ITEM(ops, i));
        if ((op == -1 && PyErr_Occurred()) ||
            encode_request(&e, (int)op, PyList_GET_ITEM(keys, i), PyList_GET_ITEM(values, i),
                           &o) < 0) {
            PyMem_Free(o.p);
            return NULL;
        }
    }
    PyObject *out = PyBytes_FromStringAndSize(o.p ? o.p : "", o.len);
    PyMem_Free(o.p);
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
    if (b->len + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    long long *v = PyMem_Realloc(b->v, (size_t)cap * sizeof(long long));
    if (v == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->v = v;
    b->cap = cap;
    return 0;
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

/* -- Tally: one worker's shared counters and reply buffers ------------------------------ */

typedef struct {
    PyObject_HEAD
    char issuing; /* T_BOOL reads and writes a char */
    long long budget; /* requests left to send; -1: no limit */
    long long next_cut_ns;
    long long bytes_in;
    long long bytes_out;
    PyObject *on_cut; /* called with ``now`` when a read arrives past next_cut_ns */
    I64s ops, codes, latency;
} Tally;

static int
Tally_init(Tally *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"on_cut", NULL};
    PyObject *on_cut = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O", kwlist, &on_cut))
        return -1;
    Py_INCREF(on_cut);
    Py_XSETREF(self->on_cut, on_cut);
    self->budget = -1;
    self->next_cut_ns = LLONG_MAX;
    return 0;
}

static int
Tally_traverse(Tally *self, visitproc visit, void *arg)
{
    Py_VISIT(self->on_cut);
    return 0;
}

static int
Tally_clear(Tally *self)
{
    Py_CLEAR(self->on_cut);
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

static PyObject *
Tally_pending(Tally *self, void *closure)
{
    return PyLong_FromSsize_t(self->ops.len);
}

static PyMemberDef Tally_members[] = {
    {"issuing", T_BOOL, offsetof(Tally, issuing), 0, "send new requests"},
    {"budget", T_LONGLONG, offsetof(Tally, budget), 0, "requests left to send; -1: no limit"},
    {"next_cut_ns", T_LONGLONG, offsetof(Tally, next_cut_ns), 0, "when the interval ends"},
    {"bytes_in", T_LONGLONG, offsetof(Tally, bytes_in), 0, "bytes read"},
    {"bytes_out", T_LONGLONG, offsetof(Tally, bytes_out), 0, "bytes written"},
    {NULL},
};

static PyGetSetDef Tally_getset[] = {
    {"pending", (getter)Tally_pending, NULL, "replies accounted and not taken yet", NULL},
    {NULL},
};

static PyMethodDef Tally_methods[] = {
    {"take", (PyCFunction)Tally_take, METH_NOARGS, Tally_take_doc},
    {NULL},
};

static PyTypeObject TallyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kvbench.engine._pump.Tally",
    .tp_doc = PyDoc_STR("Tally(on_cut=None): a worker's send state and reply buffers."),
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
    PyObject *refill; /* () -> (ops, keys, values, start): the next chunk, as lists */
    PyObject *ops, *keys, *values;
    Py_ssize_t size, pos;
    Encoding encoding;
    long long completed; /* replies since the last take_completed() */
} Stream;

static int
Stream_init(Stream *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"refill", "protocol", "ttl", "flags", NULL};
    PyObject *refill;
    int protocol;
    long long ttl = 0, flags = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Oi|LL", kwlist, &refill, &protocol, &ttl,
                                     &flags) ||
        encoding_from(protocol, ttl, flags, &self->encoding) < 0)
        return -1;
    Py_INCREF(refill);
    Py_XSETREF(self->refill, refill);
    return 0;
}

static int
Stream_traverse(Stream *self, visitproc visit, void *arg)
{
    Py_VISIT(self->refill);
    Py_VISIT(self->ops);
    Py_VISIT(self->keys);
    Py_VISIT(self->values);
    return 0;
}

static int
Stream_clear(Stream *self)
{
    Py_CLEAR(self->refill);
    Py_CLEAR(self->ops);
    Py_CLEAR(self->keys);
    Py_CLEAR(self->values);
    self->size = self->pos = 0;
    return 0;
}

static void
Stream_dealloc(Stream *self)
{
    PyObject_GC_UnTrack(self);
    Stream_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Load the next chunk from refill(); -1 with an exception on failure. */
static int
Stream_next_chunk(Stream *self)
{
    PyObject *chunk = PyObject_CallNoArgs(self->refill);
    if (chunk == NULL)
        return -1;
    PyObject *ops, *keys, *values;
    Py_ssize_t start;
    if (!PyTuple_Check(chunk) ||
        !PyArg_ParseTuple(chunk, "O!O!O!n;refill() must return (ops, keys, values, start)",
                          &PyList_Type, &ops, &PyList_Type, &keys, &PyList_Type, &values,
                          &start)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "refill() must return a tuple");
        Py_DECREF(chunk);
        return -1;
    }
    Py_ssize_t size = PyList_GET_SIZE(ops);
    if (start < 0 || start >= size || PyList_GET_SIZE(keys) < size ||
        PyList_GET_SIZE(values) < size) {
        Py_DECREF(chunk);
        PyErr_SetString(PyExc_ValueError, "refill(): no request from start, or short lists");
        return -1;
    }
    Py_INCREF(ops);
    Py_INCREF(keys);
    Py_INCREF(values);
    Py_XSETREF(self->ops, ops);
    Py_XSETREF(self->keys, keys);
    Py_XSETREF(self->values, values);
    Py_DECREF(chunk);
    self->size = size;
    self->pos = start;
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

static PyMemberDef Stream_members[] = {
    {"pos", T_PYSSIZET, offsetof(Stream, pos), READONLY, "next request of the chunk"},
    {"size", T_PYSSIZET, offsetof(Stream, size), READONLY, "requests in the chunk"},
    {NULL},
};

static PyMethodDef Stream_methods[] = {
    {"take_completed", (PyCFunction)Stream_take_completed, METH_NOARGS,
     PyDoc_STR("Replies received since the last call (all of the stream's pumps).")},
    {NULL},
};

static PyTypeObject StreamType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kvbench.engine._pump.Stream",
    .tp_doc = PyDoc_STR("Stream(refill, protocol, ttl=0, flags=0): requests shared by pumps."),
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

/* -- Pump: one connection's closed loop ------------------------------------------------- */

/* received() and issue() results besides "nothing to do" (0). */
enum { PUMP_OK = 0, PUMP_IDLE = 1, PUMP_ERROR = 2 };

typedef struct {
    PyObject_HEAD
    Tally *tally;
    Stream *stream;
    PyObject *write; /* the transport's write */
    PyObject *error; /* the grammar error that stopped the pump, or None */
    int protocol;
    long long max_reply;
    unsigned char family[MAX_OPS];
    /* In-flight FIFO: a ring of ops and send times. */
    unsigned char *fifo_ops;
    long long *fifo_sent;
    Py_ssize_t fifo_cap, fifo_head, fifo_len;
    /* Bytes of an incomplete reply, kept for the next read. */
    char *in;
    Py_ssize_t in_len, in_cap;
    /* One write's bytes. */
    char *out;
    Py_ssize_t out_cap;
} Pump;

static int
Pump_init(Pump *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"tally", "stream", "write", "protocol", "families", "max_reply",
                             NULL};
    PyObject *tally, *stream, *write;
    Py_buffer families;
    int protocol;
    long long max_reply;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!Oiy*L", kwlist, &TallyType, &tally,
                                     &StreamType, &stream, &write, &protocol, &families,
                                     &max_reply))
        return -1;
    if (((Tally *)tally)->on_cut == NULL || ((Stream *)stream)->refill == NULL) {
        PyBuffer_Release(&families);
        return not_initialized(((Tally *)tally)->on_cut == NULL ? "Tally" : "Stream");
    }
    if (protocol != P_TEXT && protocol != P_RESP2) {
        PyBuffer_Release(&families);
        PyErr_Format(PyExc_ValueError, "unknown protocol %d", protocol);
        return -1;
    }
    if (families.len > MAX_OPS) {
        PyBuffer_Release(&families);
        PyErr_Format(PyExc_ValueError, "at most %d ops", MAX_OPS);
        return -1;
    }
    memset(self->family, F_NONE, sizeof self->family);
    for (Py_ssize_t i = 0; i < families.len; i++) {
        unsigned char f = ((const unsigned char *)families.buf)[i];
        self->family[i] = f < F_COUNT ? f : F_NONE;
    }
    PyBuffer_Release(&families);
    Py_INCREF(tally);
    Py_XSETREF(self->tally, (Tally *)tally);
    Py_INCREF(stream);
    Py_XSETREF(self->stream, (Stream *)stream);
    Py_INCREF(write);
    Py_XSETREF(self->write, write);
    Py_INCREF(Py_None);
    Py_XSETREF(self->error, Py_None);
    self->protocol = protocol;
    self->max_reply = max_reply;
    return 0;
}

static int
Pump_traverse(Pump *self, visitproc visit, void *arg)
{
    Py_VISIT(self->tally);
    Py_VISIT(self->stream);
    Py_VISIT(self->write);
    Py_VISIT(self->error);
    return 0;
}

static int
Pump_clear(Pump *self)
{
    Py_CLEAR(self->tally);
    Py_CLEAR(self->stream);
    Py_CLEAR(self->write);
    Py_CLEAR(self->error);
    return 0;
}

static void
Pump_dealloc(Pump *self)
{
    PyObject_GC_UnTrack(self);
    Pump_clear(self);
    PyMem_Free(self->fifo_ops);
    PyMem_Free(self->fifo_sent);
    PyMem_Free(self->in);
    PyMem_Free(self->out);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
grow(void *pp, Py_ssize_t *cap, Py_ssize_t need, size_t item)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t n = *cap ? *cap : 256;
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

/* Room in the ring for ``more`` entries (unrolled into a fresh array when it grows). */
static int
fifo_reserve(Pump *self, Py_ssize_t more)
{
    Py_ssize_t need = self->fifo_len + more;
    if (need <= self->fifo_cap)
        return 0;
    Py_ssize_t cap = self->fifo_cap ? self->fifo_cap : 64;
    while (cap < need)
        cap *= 2;
    unsigned char *ops = PyMem_Malloc((size_t)cap);
    long long *sent = PyMem_Malloc((size_t)cap * sizeof(long long));
    if (ops == NULL || sent == NULL) {
        PyMem_Free(ops);
        PyMem_Free(sent);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < self->fifo_len; i++) {
        Py_ssize_t j = (self->fifo_head + i) % self->fifo_cap;
        ops[i] = self->fifo_ops[j];
        sent[i] = self->fifo_sent[j];
    }
    PyMem_Free(self->fifo_ops);
    PyMem_Free(self->fifo_sent);
    self->fifo_ops = ops;
    self->fifo_sent = sent;
    self->fifo_cap = cap;
    self->fifo_head = 0;
    return 0;
}

/* Send up to n requests in one write. Returns PUMP_OK, PUMP_IDLE (nothing may be sent:
 * the worker should check whether it is finished) or -1 with an exception. */
static int
pump_issue(Pump *self, Py_ssize_t n)
{
    Tally *tally = self->tally;
    Stream *stream = self->stream;
    if (!tally->issuing)
        return PUMP_IDLE;
    if (tally->budget >= 0) {
        if (n > tally->budget)
            n = (Py_ssize_t)tally->budget;
        if (n <= 0)
            return PUMP_IDLE;
    }
    if (fifo_reserve(self, n) < 0)
        return -1;
    long long sent = monotonic_ns();
    Out o = {self->out, 0, self->out_cap};
    Py_ssize_t i = 0;
    for (; i < n; i++) {
        if (stream->pos == stream->size && Stream_next_chunk(stream) < 0)
            break;
        Py_ssize_t at = stream->pos;
        long op = PyLong_AsLong(PyList_GET_ITEM(stream->ops, at));
        if ((op == -1 && PyErr_Occurred()) || op < 0 || op >= MAX_OPS) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "op %ld out of range", op);
            break;
        }
        if (encode_request(&stream->encoding, (int)op, PyList_GET_ITEM(stream->keys, at),
                           PyList_GET_ITEM(stream->values, at), &o) < 0)
            break;
        Py_ssize_t j = (self->fifo_head + self->fifo_len + i) % self->fifo_cap;
        self->fifo_ops[j] = (unsigned char)op;
        self->fifo_sent[j] = sent;
        stream->pos++;
    }
    self->out = o.p;
    self->out_cap = o.cap;
    /* A refill or an encoding failed at request i (not a server's doing): the i requests
     * before it were taken from the stream, so they are sent and kept in flight like any
     * others, and the error is raised after the write. */
    PyObject *failure = i < n ? PyErr_GetRaisedException() : NULL;
    if (i == 0) {
        PyErr_SetRaisedException(failure);
        return -1;
    }
    PyObject *bytes = PyBytes_FromStringAndSize(o.p, o.len);
    PyObject *result = NULL;
    if (bytes != NULL) {
        self->fifo_len += i;
        if (tally->budget >= 0)
            tally->budget -= i;
        tally->bytes_out += o.len;
        result = PyObject_CallOneArg(self->write, bytes);
        Py_DECREF(bytes);
    }
    if (result == NULL) { /* the write's own error; the earlier one is its context */
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

static int
account(Pump *self, Tally *tally, long long code, long long now)
{
    Py_ssize_t h = self->fifo_head;
    tally->ops.v[tally->ops.len++] = self->fifo_ops[h];
    tally->codes.v[tally->codes.len++] = code;
    tally->latency.v[tally->latency.len++] = now - self->fifo_sent[h];
    self->fifo_head = (h + 1) % self->fifo_cap;
    self->fifo_len--;
    return 0;
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
"(``error`` says which; the replies before it are accounted; the pump is unusable).");

static PyObject *
Pump_received(Pump *self, PyObject *data)
{
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "received() takes bytes");
        return NULL;
    }
    if (self->error != Py_None) { /* NULL until __init__: checked off the common path */
        if (self->error == NULL) {
            not_initialized("Pump");
            return NULL;
        }
        return PyLong_FromLong(PUMP_ERROR);
    }
    long long now = monotonic_ns();
    Tally *tally = self->tally;
    if (now >= tally->next_cut_ns && tally->on_cut != Py_None) {
        PyObject *when = PyLong_FromLongLong(now);
        if (when == NULL)
            return NULL;
        PyObject *result = PyObject_CallOneArg(tally->on_cut, when);
        Py_DECREF(when);
        if (result == NULL)
            return NULL;
        Py_DECREF(result);
    }
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    tally->bytes_in += n;
    const char *buf = PyBytes_AS_STRING(data);
    if (self->in_len) {
        if (grow(&self->in, &self->in_cap, self->in_len + n, 1) < 0)
            return NULL;
        memcpy(self->in + self->in_len, buf, (size_t)n);
        self->in_len += n;
        buf = self->in;
        n = self->in_len;
    }
    /* At most one reply per in-flight request: reserve for all of them. */
    if (i64s_reserve(&tally->ops, self->fifo_len) < 0 ||
        i64s_reserve(&tally->codes, self->fifo_len) < 0 ||
        i64s_reserve(&tally->latency, self->fifo_len) < 0)
        return NULL;
    Py_ssize_t pos = 0, done = 0;
    Scan scan = {0, NULL, {0}};
    while (pos < n) {
        if (self->fifo_len == 0) {
            scan.error = "a reply arrived with no request pending";
            break;
        }
        int family = self->family[self->fifo_ops[self->fifo_head]];
        Py_ssize_t k = scan_reply(self->protocol, buf + pos, n - pos, family, self->max_reply,
                                  &scan);
        if (k <= 0)
            break;
        account(self, tally, scan.code, now);
        pos += k;
        done++;
    }
    self->stream->completed += done;
    if (scan.error != NULL) {
        /* The error quotes bytes of buf: build it before they may go. */
        int failed = set_error(self, &scan);
        self->in_len = 0;
        if (failed < 0)
            return NULL;
        return PyLong_FromLong(PUMP_ERROR);
    }
    /* Keep the incomplete rest for the next read. */
    Py_ssize_t rest = n - pos;
    if (rest) {
        if (buf == self->in)
            memmove(self->in, self->in + pos, (size_t)rest);
        else {
            if (grow(&self->in, &self->in_cap, rest, 1) < 0)
                return NULL;
            memcpy(self->in, buf + pos, (size_t)rest);
        }
    }
    self->in_len = rest;
    if (!done)
        return PyLong_FromLong(PUMP_OK);
    int status = pump_issue(self, done);
    if (status < 0)
        return NULL;
    return PyLong_FromLong(status);
}

PyDoc_STRVAR(Pump_issue_doc,
"issue(n) -> int\n\n"
"Send up to ``n`` requests in one write; 1 when none could be sent, else 0.");

static PyObject *
Pump_issue(Pump *self, PyObject *arg)
{
    if (self->tally == NULL) {
        not_initialized("Pump");
        return NULL;
    }
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

PyDoc_STRVAR(Pump_oldest_doc,
"oldest_sent_ns() -> int | None\n\nWhen the oldest unanswered request was sent.");

static PyObject *
Pump_oldest_sent_ns(Pump *self, PyObject *unused)
{
    if (self->tally == NULL) {
        not_initialized("Pump");
        return NULL;
    }
    if (self->fifo_len == 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(self->fifo_sent[self->fifo_head]);
}

PyDoc_STRVAR(Pump_expire_doc,
"expire(now, timeout_ns) -> bytes\n\n"
"Remove the requests at the head sent ``timeout_ns`` or more before ``now``; their ops.");

static PyObject *
Pump_expire(Pump *self, PyObject *args)
{
    long long now, timeout_ns;
    if (self->tally == NULL) {
        not_initialized("Pump");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "LL", &now, &timeout_ns))
        return NULL;
    Py_ssize_t k = 0;
    while (k < self->fifo_len &&
           now - self->fifo_sent[(self->fifo_head + k) % self->fifo_cap] >= timeout_ns)
        k++;
    PyObject *ops = PyBytes_FromStringAndSize(NULL, k);
    if (ops == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < k; i++)
        PyBytes_AS_STRING(ops)[i] = (char)self->fifo_ops[(self->fifo_head + i) % self->fifo_cap];
    if (k) {
        self->fifo_head = (self->fifo_head + k) % self->fifo_cap;
        self->fifo_len -= k;
    }
    return ops;
}

PyDoc_STRVAR(Pump_drop_doc,
"drop() -> bytes\n\n"
"Forget every request in flight and any buffered bytes; the ops that were in flight.");

static PyObject *
Pump_drop(Pump *self, PyObject *unused)
{
    if (self->tally == NULL) {
        not_initialized("Pump");
        return NULL;
    }
    PyObject *ops = PyBytes_FromStringAndSize(NULL, self->fifo_len);
    if (ops == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < self->fifo_len; i++)
        PyBytes_AS_STRING(ops)[i] = (char)self->fifo_ops[(self->fifo_head + i) % self->fifo_cap];
    self->fifo_head = self->fifo_len = 0;
    self->in_len = 0;
    return ops;
}

static PyObject *
Pump_inflight(Pump *self, void *closure)
{
    return PyLong_FromSsize_t(self->fifo_len);
}

static PyMemberDef Pump_members[] = {
    {"error", T_OBJECT, offsetof(Pump, error), READONLY, "the error that stopped the pump"},
    {NULL},
};

static PyGetSetDef Pump_getset[] = {
    {"inflight", (getter)Pump_inflight, NULL, "requests sent and not answered", NULL},
    {NULL},
};

static PyMethodDef Pump_methods[] = {
    {"received", (PyCFunction)Pump_received, METH_O, Pump_received_doc},
    {"issue", (PyCFunction)Pump_issue, METH_O, Pump_issue_doc},
    {"oldest_sent_ns", (PyCFunction)Pump_oldest_sent_ns, METH_NOARGS, Pump_oldest_doc},
    {"expire", (PyCFunction)Pump_expire, METH_VARARGS, Pump_expire_doc},
    {"drop", (PyCFunction)Pump_drop, METH_NOARGS, Pump_drop_doc},
    {NULL},
};

static PyTypeObject PumpType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kvbench.engine._pump.Pump",
    .tp_doc = PyDoc_STR("Pump(tally, stream, write, protocol, families, max_reply)"),
    .tp_basicsize = sizeof(Pump),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Pump_init,
    .tp_dealloc = (destructor)Pump_dealloc,
    .tp_traverse = (traverseproc)Pump_traverse,
    .tp_clear = (inquiry)Pump_clear,
    .tp_members = Pump_members,
    .tp_getset = Pump_getset,
    .tp_methods = Pump_methods,
};

/* -- a scanner entry point for tests ---------------------------------------------------- */

PyDoc_STRVAR(scan_replies_doc,
"scan_replies(protocol, families, ops, data, max_reply) -> (codes, consumed, error)\n\n"
"Classify the replies in ``data`` answering ``ops`` (bytes, one op per request) as a\n"
"Pump would: the codes of the complete ones, the bytes they took, and the grammar error\n"
"that stopped the scan (or None). For tests that compare with the Python codecs.");

static PyObject *
scan_replies(PyObject *module, PyObject *args)
{
    int protocol;
    Py_buffer families, ops, data;
    long long max;
    if (!PyArg_ParseTuple(args, "iy*y*y*L", &protocol, &families, &ops, &data, &max))
        return NULL;
    unsigned char family[MAX_OPS] = {0};
    for (Py_ssize_t i = 0; i < families.len && i < MAX_OPS; i++)
        family[i] = ((const unsigned char *)families.buf)[i] % F_COUNT;
    PyObject *codes = PyList_New(0);
    Py_ssize_t pos = 0, i = 0;
    Scan scan = {0, NULL, {0}};
    const char *p = data.buf;
    while (codes != NULL && pos < data.len) {
        if (i == ops.len) {
            scan.error = "a reply arrived with no request pending";
            break;
        }
        unsigned char op = ((const unsigned char *)ops.buf)[i];
        Py_ssize_t k = scan_reply(protocol, p + pos, data.len - pos,
                                  op < MAX_OPS ? family[op] : F_NONE, max, &scan);
        if (k <= 0)
            break;
        PyObject *code = PyLong_FromLongLong(scan.code);
        if (code == NULL || PyList_Append(codes, code) < 0)
            Py_CLEAR(codes);
        Py_XDECREF(code);
        pos += k;
        i++;
    }
    PyObject *error = Py_None;
    if (codes != NULL && scan.error != NULL) /* before data, whose bytes it quotes, goes */
        error = scan_error(&scan);
    else
        Py_INCREF(error);
    PyBuffer_Release(&families);
    PyBuffer_Release(&ops);
    PyBuffer_Release(&data);
    if (codes == NULL || error == NULL) {
        Py_XDECREF(codes);
        Py_XDECREF(error);
        return NULL;
    }
    return Py_BuildValue("(NnN)", codes, pos, error);
}

/* -- module ----------------------------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"encode", encode, METH_VARARGS, encode_doc},
    {"scan_replies", scan_replies, METH_VARARGS, scan_replies_doc},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kvbench.engine._pump",
    .m_doc = PyDoc_STR("The compiled closed-loop hot path (memcached text, RESP2)."),
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
    struct {
        const char *name;
        long value;
    } constants[] = {
        {"TEXT", P_TEXT}, {"RESP2", P_RESP2}, {"F_GET", F_GET}, {"F_MGET", F_MGET},
        {"F_STORE", F_STORE}, {"F_DELETE", F_DELETE}, {"F_ARITH", F_ARITH},
        {"K_HIT", K_HIT}, {"K_MISS", K_MISS}, {"K_STORED", K_STORED},
        {"K_NOT_STORED", K_NOT_STORED}, {"K_EXISTS", K_EXISTS}, {"K_NOT_FOUND", K_NOT_FOUND},
        {"K_DELETED", K_DELETED}, {"K_VALUE", K_VALUE},
        {"K_ERROR_REPLY", K_ERROR}, {"KEYS_SHIFT", KEYS_SHIFT}, {"MAX_OPS", MAX_OPS},
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
