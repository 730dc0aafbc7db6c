/* What the compiled pump (_pump.c) and its protocols share.
 *
 * A protocol (_pump_text.c, _pump_resp.c, _pump_binary.c, _pump_meta.c) is a Wire: a
 * scanner that classifies one reply with the code its Python codec's read_kinds gives
 * (kind | keys << KEYS_SHIFT), and an encoder that appends one request byte for byte as
 * the codec's encode_many writes it. Both mirror the codecs in protocols/ (the reference;
 * tests hold them together); the pump owns the loop, the FIFO and the buffers.
 *
 * The encoder takes a request already resolved (a Request: pointers and lengths, room
 * reserved) whichever form its chunk came in: Python lists of ops, keys and values (a
 * workload's chunk), or a packed chunk (a replay's lane, from its spool: one bytes-like
 * column each for the ops, the keys and the values, and native uint32 offsets into them;
 * _pump.c's Stream holds their buffers and checks them once when it loads the chunk).
 *
 * Sans-IO: no sockets, no clock here.
 */
#ifndef KVBENCH_PUMP_H
#define KVBENCH_PUMP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if PY_VERSION_HEX < 0x030C0000
/* Python 3.12's one-object exception API, on 3.11. */
static inline PyObject *
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

static inline void
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
    K_OK = 9,
    K_VALUE = 10,
    K_ERROR = 20,
    /* Redis Cluster redirects (a cluster pump's -MOVED and -ASK replies: _pump.c). */
    K_MOVED = 26,
    K_ASK = 27,
};
#define KEYS_SHIFT 8

/* What a reply must look like, per op: the engine passes a table op -> family.
 * F_APPEND: RESP's APPEND, answered by the value's new length (an integer: stored).
 * F_COMMAND: an arbitrary command's (--command), any value its protocol frames. The
 * engine gives each command name's code (workload.commands: COMMAND_BASE + j, which
 * is also OP_RMW's, as config never sends both) this family, and the pump sends a
 * request of that family as OP_COMMAND. */
enum { F_NONE = 0, F_GET, F_MGET, F_STORE, F_DELETE, F_ARITH, F_APPEND, F_COMMAND, F_COUNT };
/* The protocols, as engine/fastpath.py numbers them. */
/* RESP3: RESP2's requests and scanner (a connection is switched to it by HELLO 3, which
 * the Python link sends and reads before the pump has it), its push messages skipped. */
/* HTTP: a memc-style gateway's keep-alive GETs (_pump_http.c). */
enum { P_TEXT = 1, P_RESP2 = 2, P_BINARY = 3, P_META = 4, P_RESP3 = 5, P_HTTP = 6, P_COUNT };
/* protocols.base.Op: the ops a workload mix sends, and those a replay adds (the only
 * ones encoded here; each wire encodes the ones its protocol sends). */
enum {
    OP_GET = 0, OP_SET = 1, OP_DELETE = 2, OP_INCR = 3, OP_DECR = 4, OP_MGET = 5,
    OP_ADD = 6, OP_REPLACE = 7, OP_APPEND = 8, OP_PREPEND = 9, OP_CAS = 10, OP_GETS = 12,
    /* An arbitrary command (--command): the chunk's key is its whole request, rendered
     * by its template (protocols/commands.py), and the encoder writes it as it is. */
    OP_COMMAND = 15,
    /* A read-modify-write (workload.mix.RMW_CODE, the first code after Op's): a get of
     * its key then a set of it, written together and answered by both, timed and
     * counted as one op (engine/rmw.py). No wire encodes it: the pump writes its two
     * requests (encode_request) and folds their replies into one. */
    OP_RMW = 16,
};

/* The first code after Op's (workload.commands.COMMAND_BASE): a --command's codes start
 * here (its names' for the recorder, its entries' in a packed chunk), as an rmw's does. */
#define COMMAND_BASE 16

/* The ops whose request carries a value (the storage commands). */
static inline int
op_stores(int op)
{
    return op == OP_SET || (op >= OP_ADD && op <= OP_CAS);
}

/* The ops whose chunk gives a value: the stores', and an rmw's (its set's). */
static inline int
op_has_value(int op)
{
    return op_stores(op) || op == OP_RMW;
}

/* A ValueError for an op the wire does not encode; -1. */
int no_encoding(int op);

#define MAX_OPS 64
/* A declared data block size with more digits is refused (protocols/_memcache_lines.py). */
#define MAX_SIZE_DIGITS 18
/* The bytes of a reply an error message quotes at most: the Python codecs' ``[:64]``. */
#define QUOTE_MAX 64

/* Scan results: > 0 bytes consumed; 0 incomplete; < 0 a grammar error (message set). */
#define NEED 0
#define BAD (-1)

/* A scan's outcome for one reply. */
typedef struct {
    long long code;       /* kind | keys << KEYS_SHIFT */
    const char *error;    /* set when the scan returns BAD (ASCII) */
    char detail[112];     /* formatted error text when error == detail */
    const char *quote;    /* reply bytes the error quotes after ``error`` (NULL: none) */
    Py_ssize_t quote_len;
    /* binary: the opaque of the last response consumed; read, and written with a reply */
    uint32_t answered;
    /* A reply that carries one value (a single get's hit; meta's incr too): where the
     * value is in it, for ``--verify``. Set for that reply only (the pump resets
     * value_at to -1 before each scan). */
    Py_ssize_t value_at, value_len;
    /* The value is an HTTP chunked body at value_at (its chunk lines between its bytes,
     * value_len of them in all): http_chunked_join copies it out whole. Set with value_at
     * by the HTTP scanner, which alone sets it (no reset per scan). */
    int value_chunked;
    /* The bytes consumed answer no request: a RESP3 push message, which the server may
     * send at any time (the pump resets it before each scan). */
    int skipped;
    /* The response says the server closes the connection after it (HTTP: Connection:
     * close, HTTP/1.0 without keep-alive, a close-delimited body). The HTTP scanner sets
     * it for every response it completes and no other wire sets it, so the pump does not
     * reset it per scan. */
    int closing;
} Scan;

/* The request a reply answers: the head of the pending FIFO. */
typedef struct {
    int op, family;
    uint32_t tag;  /* binary: the opaque its reply completes with; meta: its first token */
    uint32_t keys; /* a multi-get's key count */
} Head;

/* A connection's opaques (binary opaque, meta O token): the next one to send, and the
 * tag and key count the encoder gave the last request (the pump's FIFO keeps them). */
typedef struct {
    uint32_t next, tag, keys;
} Tags;

/* A connection's request settings (the codec's CodecOptions: ttl and flags; HTTP's
 * request target's start, "GET /<path>?cmd=", and its tail, " HTTP/1.1\r\nHost: ...
 * \r\n\r\n", borrowed from the Stream that holds them; empty for the other protocols). */
typedef struct {
    int protocol;
    long long ttl, flags;
    const char *http_target, *http_tail;
    Py_ssize_t http_target_len, http_tail_len;
} Encoding;

/* A growable output buffer; callers reserve (out_reserve) before they put. */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Out;

/* One request, resolved from its chunk: a single-key op's key and value (a store's; else
 * none, value_len 0), room for them and FRAME_BYTES reserved in the output; a multi-get's
 * keys object (a tuple or list of bytes-like keys; only a list-form chunk has multi-gets),
 * which its encoder reads and reserves for itself (multi_get_of). */
typedef struct {
    const char *key, *value;
    Py_ssize_t key_len, value_len;
    PyObject *keys; /* OP_MGET only */
} Request;

typedef struct {
    /* Classify the reply at p[0:n] answering ``head`` (NULL: nothing is pending). */
    Py_ssize_t (*scan)(const char *p, Py_ssize_t n, const Head *head, long long max, Scan *s);
    /* Append request ``r`` of ``op`` (one of ``ops``) to ``o``; -1 with an exception
     * (nothing appended, no opaque used). */
    int (*encode)(const Encoding *e, int op, const Request *r, Tags *t, Out *o);
    /* The tags of a request of ``op`` with ``keys`` keys, as ``encode`` gives them (NULL:
     * the protocol has no opaques). */
    void (*tag)(int op, uint32_t keys, Tags *t);
    /* Check a connection's settings; -1 with an exception (NULL: any will do). */
    int (*check)(const Encoding *e);
    /* The ops ``encode`` writes, a bit each (OP_BIT); the pump refuses any other before
     * it resolves the request (a list form's) or when it loads the chunk (a packed one). */
    uint64_t ops;
} Wire;

#define OP_BIT(op) (1ULL << (op))

/* Whether ``wire`` encodes ``op`` (any int): an rmw where it encodes gets and sets. */
static inline int
wire_encodes(const Wire *wire, long op)
{
    if (op == OP_RMW)
        return (wire->ops & (OP_BIT(OP_GET) | OP_BIT(OP_SET))) == (OP_BIT(OP_GET) | OP_BIT(OP_SET));
    return op >= 0 && op < MAX_OPS && (wire->ops & OP_BIT(op)) != 0;
}

extern const Wire text_wire, resp2_wire, resp3_wire, binary_wire, meta_wire, http_wire;

/* A --command's template (protocols/commands.py's RespTemplate, TextTemplate), which a
 * Stream renders for each request of a packed chunk whose op is its entry's code, piece
 * by piece: literal bytes; the key with the bytes around it, as one RESP bulk string or
 * as it is (text); the value as one bulk string, its size in digits (a text storage
 * line's byte count) or as it is (its data block). The bytes are borrowed from the
 * objects the Stream holds. The piece kinds are protocols.commands.PIECE_*'s. */
enum {
    PIECE_LITERAL = 0,
    PIECE_KEY_BULK = 1,
    PIECE_VALUE_BULK = 2,
    PIECE_KEY = 3,
    PIECE_VALUE_SIZE = 4,
    PIECE_VALUE = 5,
    PIECE_KINDS
};
typedef struct {
    int kind;
    const char *p, *suffix; /* a literal's bytes, or a key's prefix; a key's suffix */
    Py_ssize_t len, suffix_len;
} Piece;
typedef struct {
    Piece *pieces;
    Py_ssize_t count;
    /* What a request takes at most besides its key's and value's bytes, and how many
     * times each is written. */
    Py_ssize_t room;
    int keys, datas;
    int record; /* the code its requests are recorded under: its name's */
} Template;
/* What rendering ``t`` with ``r`` may take. */
static inline Py_ssize_t
template_room(const Template *t, const Request *r)
{
    return t->room + t->keys * r->key_len + t->datas * r->value_len;
}

/* HTTP (_pump_http.c): the byte each value byte is sent (and stored) as, http1.VALUE_TABLE;
 * and the data of a chunked body the scanner found whole at body[0:n] joined into out
 * (Scan.value_len bytes). */
const unsigned char *http_value_map(void);
void http_chunked_join(const char *body, Py_ssize_t n, char *out);

/* -- failures (_pump.c) ---------------------------------------------------------------- */

Py_ssize_t scan_fail(Scan *s, const char *message);
/* A formatted message (ASCII), quoting ``n`` bytes of ``line`` (at most QUOTE_MAX) after it,
 * escaped when the error is built; ``line`` NULL quotes nothing. */
Py_ssize_t scan_failf(Scan *s, const char *line, Py_ssize_t n, const char *format, ...);
/* Bytes arrived with nothing pending. */
Py_ssize_t scan_no_request(Scan *s);

/* -- requests (_pump.c) ------------------------------------------------------------------ */

/* Room in the buffer ``*pp`` (``*cap`` items of ``item`` bytes) for ``need`` items: the
 * capacity doubled from ``*cap`` (``first`` while 0) until it is enough, the buffer
 * reallocated to it. 0, or -1 with MemoryError (the buffer and ``*cap`` as they were). */
int grow(void *pp, Py_ssize_t *cap, Py_ssize_t need, Py_ssize_t first, size_t item);
int out_reserve(Out *o, Py_ssize_t more);
/* The bytes of a key or value: bytes, bytearray or a contiguous memoryview. */
int view_of(PyObject *obj, const char **p, Py_ssize_t *n);

/* What a request's framing (command words, lengths, flags, a binary header and extras,
 * the token) takes at most besides its key and value, or besides a multi-get's keys. */
#define FRAME_BYTES 128

/* A multi-get's keys (a tuple or list of bytes-like keys), with room reserved in ``o``
 * for each and ``per_key`` bytes around it; -1 with an exception. */
int multi_get_of(PyObject *keys, Py_ssize_t per_key, Out *o, PyObject ***items,
                 Py_ssize_t *count);

static inline void
put(Out *o, const void *src, Py_ssize_t n)
{
    memcpy(o->p + o->len, src, (size_t)n);
    o->len += n;
}

#define PUT_LITERAL(o, s) put((o), (s), (Py_ssize_t)sizeof(s) - 1)

/* Decimal digits of v into buf (24 bytes at least); returns where they start. */
static inline char *
format_ll(long long v, char *end)
{
    char *q = end;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--q = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--q = '-';
    return q;
}

static inline void
put_ll(Out *o, long long v)
{
    char digits[24];
    char *start = format_ll(v, digits + sizeof digits);
    put(o, start, digits + sizeof digits - start);
}

/* A literal, then a number: a field of a command line (" <flags>", " T<ttl>"). */
#define PUT_FIELD(o, s, v) (PUT_LITERAL(o, s), put_ll((o), (v)))

/* -- one request ------------------------------------------------------------------------- */

/* Literal bytes, for the encoders' per-op tables. */
typedef struct {
    const char *p;
    Py_ssize_t n;
} Words;

#define WORDS(s) {(s), (Py_ssize_t)sizeof(s) - 1}

static inline void
put_words(Out *o, Words w)
{
    put(o, w.p, w.n);
}

/* A RESP bulk string: "$<n>\r\n" p "\r\n". */
static inline void
put_bulk(Out *o, const char *p, Py_ssize_t n)
{
    PUT_LITERAL(o, "$");
    put_ll(o, n);
    PUT_LITERAL(o, "\r\n");
    put(o, p, n);
    PUT_LITERAL(o, "\r\n");
}

/* A multi-get's keys, resolved and with room reserved (multi_get_of), read in order:
 * the current one in ``key``, ``key_len``. */
typedef struct {
    PyObject **items;
    Py_ssize_t count, next;
    const char *key;
    Py_ssize_t key_len;
} MultiGet;

/* Resolve ``r``'s keys into ``m``, ``per_key`` bytes reserved around each; -1 with an
 * exception. */
static inline int
mget_start(const Request *r, Py_ssize_t per_key, Out *o, MultiGet *m)
{
    m->next = 0;
    return multi_get_of(r->keys, per_key, o, &m->items, &m->count);
}

/* Move ``m`` to its next key; 0 after the last. */
static inline int
mget_next(MultiGet *m)
{
    if (m->next == m->count)
        return 0;
    view_of(m->items[m->next++], &m->key, &m->key_len);
    return 1;
}

/* How a text protocol (text, meta, RESP) writes one request, for encode_one. */
typedef struct {
    /* Per op: the words before the key and after it; a store's first word is its verb
     * (text) or mode flag (meta), which ``store`` places. */
    Words words[OP_GETS + 1][2];
    int bulk_key; /* the key as a RESP bulk string */
    /* A multi-get of the keys in ``m`` (read with mget_next); -1 with an exception. */
    int (*mget)(MultiGet *m, Tags *t, Out *o);
    Py_ssize_t mget_per_key; /* the bytes it writes around each key, at most */
    /* A storage command, data block (and meta's token) included. */
    void (*store)(const Encoding *e, int op, const Request *r, Tags *t, Out *o);
    /* After the key and its words (meta: the token); NULL: nothing. */
    void (*close)(int op, Tags *t, Out *o);
} Encoder;

/* Append request ``r`` of ``op`` as ``x`` writes it; -1 with an exception.
 *
 * Each encoder calls it with its own constant table: inlined there, the table's functions
 * are known and called directly, so a request costs no indirect call more than the
 * wire's ``encode``. */
static inline int
encode_one(const Encoder *x, const Encoding *e, int op, const Request *r, Tags *t, Out *o)
{
    if (op == OP_MGET) {
        MultiGet m;
        if (mget_start(r, x->mget_per_key, o, &m) < 0)
            return -1;
        return x->mget(&m, t, o);
    }
    if (op_stores(op)) {
        x->store(e, op, r, t, o);
        return 0;
    }
    put_words(o, x->words[op][0]);
    if (x->bulk_key)
        put_bulk(o, r->key, r->key_len);
    else
        put(o, r->key, r->key_len);
    put_words(o, x->words[op][1]);
    if (x->close != NULL)
        x->close(op, t, o);
    return 0;
}

/* Defines ``name``, a Wire's encode: encode_one over the constant table ``x``. */
#define DEFINE_ENCODE(name, x)                                                                \
    static int name(const Encoding *e, int op, const Request *r, Tags *t, Out *o)             \
    {                                                                                         \
        return encode_one(&(x), e, op, r, t, o);                                              \
    }

/* A memcached store's data block, after its command line: the value and CRLF. */
static inline void
put_data_block(Out *o, const Request *r)
{
    put(o, r->value, r->value_len);
    PUT_LITERAL(o, "\r\n");
}

/* The ops the memcached text and meta wires encode: a workload mix's and a replay's. */
#define MEMCACHED_OPS                                                                         \
    (OP_BIT(OP_GET) | OP_BIT(OP_SET) | OP_BIT(OP_DELETE) | OP_BIT(OP_INCR) | OP_BIT(OP_DECR) | \
     OP_BIT(OP_MGET) | OP_BIT(OP_ADD) | OP_BIT(OP_REPLACE) | OP_BIT(OP_APPEND) |             \
     OP_BIT(OP_PREPEND) | OP_BIT(OP_CAS) | OP_BIT(OP_GETS))

/* -- bytes ------------------------------------------------------------------------------- */

/* Index of the first CRLF in p[0:n], or -1. */
static inline Py_ssize_t
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

static inline int
is_word(const char *p, Py_ssize_t n, const char *word)
{
    size_t len = strlen(word);
    return (size_t)n == len && memcmp(p, word, len) == 0;
}

static inline int
starts(const char *p, Py_ssize_t n, const char *prefix)
{
    size_t len = strlen(prefix);
    return (size_t)n >= len && memcmp(p, prefix, len) == 0;
}

static inline int
all_digits(const char *p, Py_ssize_t n)
{
    if (n <= 0)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return 0;
    return 1;
}

/* memcached's error lines (protocol.txt "Error strings"), in every memcached protocol. */
static inline int
is_error_line(const char *p, Py_ssize_t n)
{
    return is_word(p, n, "ERROR") || is_word(p, n, "CLIENT_ERROR") ||
           is_word(p, n, "SERVER_ERROR") || starts(p, n, "ERROR ") ||
           starts(p, n, "CLIENT_ERROR ") || starts(p, n, "SERVER_ERROR ");
}

/* -- --verify (_pump_verify.c) ----------------------------------------------------------- */

/* How a pump checks a get hit's value: not, as a value derived from its key, or as a
 * timestamp (engine/fastpath.py's VERIFY_* mirror them). */
enum { VERIFY_NONE = 0, VERIFY_DERIVED = 1, VERIFY_TIMESTAMP = 2, VERIFY_COUNT };
/* Whether value[0:n] is a value workload/verify.py's derive_value gives for the key. */
int verify_derived(const char *key, Py_ssize_t key_len, const char *value, Py_ssize_t n);
/* Whether value[HEADER:n] is, through ``map`` (a byte each), the body of the value
 * derived for the key with the 8-byte ``head`` (its version and a length of n): a value
 * an HTTP gateway stored mapped; the caller compares the mapped head. */
int verify_derived_mapped(const char *key, Py_ssize_t key_len, const unsigned char *head,
                          const char *value, Py_ssize_t n, const unsigned char *map);
/* Whether value[0:n] is a timestamp in [low_ms, high_ms], or with ``low_ms`` < 0 one after
 * the epoch and not after now (workload/verify.py's timestamp_check). */
int verify_timestamp(const char *value, Py_ssize_t n, long long low_ms, long long high_ms);
/* workload/verify.py's derive_value(key, version, size) into out[0:size]; size > 8. */
void verify_derive(const char *key, Py_ssize_t key_len, uint32_t version, char *out,
                   Py_ssize_t size);
/* The module's check_value(key, value) and derive_value(key, version, size). */
PyObject *verify_check_value(PyObject *module, PyObject *args);
PyObject *verify_derive_value(PyObject *module, PyObject *args);

/* -- HDR histograms, in kvbench.metrics.histogram's layout (_pump.c) --------------------- */

/* Histogram's layout (metrics/histogram.py): 1 ns .. 60 s at 3 significant figures, so unit
 * magnitude 0, sub-bucket half count magnitude 10, 27,648 counters. The module exports
 * them (HDR_*) and tests/unit/engine/test_pump_fold.py holds them, and the bucket of every
 * value, to Histogram's. */
#define HDR_HALF_MAGNITUDE 10
#define HDR_SUB_BUCKET_MASK ((2ULL << HDR_HALF_MAGNITUDE) - 1)
#define HDR_SHIFT_BASE (HDR_HALF_MAGNITUDE + 1)
#define HDR_HIGHEST 60000000000LL
#define HDR_COUNTS_LEN 27648

/* Counters per block of the used-block bitmap, and the bitmap's 64-bit words. */
#define HDR_BLOCK_SHIFT 6
#define HDR_BLOCK_WORDS ((HDR_COUNTS_LEN >> HDR_BLOCK_SHIFT) / 64 + 1)

/* One histogram's counters and scalars, as a Histogram keeps them, and which blocks of
 * 64 counters a value went into since the last hdr_take (it reads only those). */
typedef struct {
    long long *counts; /* HDR_COUNTS_LEN counters; NULL until the first value */
    long long total, min, max, sum, out_of_range;
    uint64_t used[HDR_BLOCK_WORDS];
} Hdr;

/* Histogram's counts_index_for, for 0 <= v <= HDR_HIGHEST:
 * (shift << half magnitude) + (v >> shift), shift = bit_length(v | mask) - (half + 1). */
static inline Py_ssize_t
hdr_index(long long v)
{
    int shift = 64 - __builtin_clzll((unsigned long long)v | HDR_SUB_BUCKET_MASK) -
                HDR_SHIFT_BASE;
    return ((Py_ssize_t)shift << HDR_HALF_MAGNITUDE) + (Py_ssize_t)(v >> shift);
}

/* Allocate ``h``'s counters if it has none yet; -1 with a MemoryError. */
int hdr_ready(Hdr *h);

/* Record one value into a histogram whose counters exist (hdr_ready), as Histogram.record
 * does: a value below 0 as 0 and one above HDR_HIGHEST as HDR_HIGHEST, each counted in
 * out_of_range too; min and sum over the values as recorded, max over the values given. */
static inline void
hdr_add(Hdr *h, long long given)
{
    long long v = given;
    if (v < 0 || v > HDR_HIGHEST) {
        h->out_of_range++;
        v = v < 0 ? 0 : HDR_HIGHEST;
    }
    Py_ssize_t at = hdr_index(v);
    h->counts[at]++;
    h->used[at >> (HDR_BLOCK_SHIFT + 6)] |= 1ULL << ((at >> HDR_BLOCK_SHIFT) & 63);
    long long high = given > v ? given : v;
    if (h->total++ == 0) {
        h->min = v;
        h->max = high;
    }
    else {
        if (v < h->min)
            h->min = v;
        if (high > h->max)
            h->max = high;
    }
    h->sum += v; /* (exact below 2**63 ns summed per interval: 292 years) */
}

/* hdr_ready, then hdr_add; -1 with a MemoryError. */
static inline int
hdr_record(Hdr *h, long long v)
{
    if (h->counts == NULL && hdr_ready(h) < 0)
        return -1;
    hdr_add(h, v);
    return 0;
}

/* The histogram as ``(counts, total, min, max, sum, out_of_range)`` (counts: a bytearray of
 * HDR_COUNTS_LEN native int64), then emptied; None when it holds nothing. NULL with an
 * exception. */
PyObject *hdr_take(Hdr *h);
void hdr_free(Hdr *h);

/* Record one of the event loop's ticks (Poller.tick) into ``tally`` (a Tally, else a
 * TypeError): how late it woke into its hiccup histogram, and its requests in flight as a
 * sample when ``sample``; -1 with an exception. */
int tally_tick(PyObject *tally, long long late_ns, int sample);
/* Whether ``object`` is a Tally. */
int is_tally(PyObject *object);

/* -- the compiled event loop (_pump_loop.c) and the pump (_pump.c) ---------------------- */

/* Calls from the pumps and the poller into Python (a refill, a cut, a write, a stop, an
 * end, a reader), counted: Poller.wait stops waiting after a batch that made one, so
 * what the callback scheduled runs. */
extern unsigned long long pump_python_calls;

/* A worker's epoll set of its connections' sockets (kvbench.engine._pump.Poller). */
typedef struct Poller Poller;

/* Send ``n`` bytes of a pump's requests on connection ``slot``: what the socket does not
 * take now is kept and sent when it is writable; a failure ends the connection later (in
 * Poller.poll). Never raises. */
void poller_send(Poller *poller, Py_ssize_t slot, const char *p, Py_ssize_t n);
/* Adds the Poller type to the module; -1 with an exception. */
int loop_add_types(PyObject *module);

/* ``pump`` (a Pump, else a TypeError) sends on ``slot`` of ``poller`` from now on; -1 with
 * an exception (not a pump, or one inside its own send, or another connection's). */
int pump_attach(PyObject *pump, Poller *poller, Py_ssize_t slot);
/* ``pump`` writes with its ``write`` again. */
void pump_detach(PyObject *pump);
/* 1 and when the oldest request in flight on ``pump`` (a Pump) was sent; 0: none. */
int pump_oldest_sent(PyObject *pump, long long *sent_ns);
/* A read's bytes: Pump.received() without a bytes object; the status, or -1 with an
 * exception. */
int pump_feed(PyObject *pump, const char *buf, Py_ssize_t n);
/* The pump's ``on_stopped`` (borrowed; NULL or None: none). */
PyObject *pump_on_stopped(PyObject *pump);

/* The event loop's open-loop schedule (_pump_loop.c): */
/* 0 when ``pump`` is an initialized open-loop Pump; else -1 with an exception. */
int pump_check_scheduled(PyObject *pump);
/* Requests in flight on a Pump. */
Py_ssize_t pump_inflight(PyObject *pump);
/* Pump.issue_scheduled() with the intended times times[0:n]: 0, or -1 with an exception. */
int pump_send_scheduled(PyObject *pump, Py_ssize_t n, const long long *times);
/* 0 when ``tally`` is an initialized Tally; else -1 with an exception. */
int tally_check(PyObject *tally);
/* A Tally's ``issuing``, and where its ``budget`` is (-1: no limit). */
int tally_issuing(PyObject *tally);
long long *tally_budget(PyObject *tally);

#endif
