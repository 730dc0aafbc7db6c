/* memcached binary protocol for the pump (memcached doc/protocol-binary.xml): the reply
 * scanner and the request encoder, mirroring protocols/memcache_binary.py (the reference).
 *
 * Requests are 24-byte headers (magic 0x80) with a fresh 32-bit opaque each: get, set
 * (extras: flags, expiry), delete, incr/decr (extras: delta 1, initial 0, expiry all ones:
 * a missing counter is "not found", never created), and a multi-get as one getkq per key
 * then a noop, whose response completes the reply (only hits answer a getkq); a replay's
 * gets (a get), add and replace (a set's extras), append and prepend (no extras).
 *
 * A response must carry the opaque of the oldest pending request, as the codec checks:
 * memcached answers in order. Packets with another opaque complete no reply and are
 * taken only where the codec takes them: a getkq hit (or failure) of the pending
 * multi-get, or a quiet op's failure, sent after the last response and before the pending
 * request. Every body length is bounded (max_reply) before the body is waited for.
 */
#include "_pump.h"

#define HEADER_BYTES 24
#define MAGIC_REQUEST 0x80
#define MAGIC_RESPONSE 0x81

enum {
    OPCODE_GET = 0x00,
    OPCODE_SET = 0x01,
    OPCODE_ADD = 0x02,
    OPCODE_REPLACE = 0x03,
    OPCODE_DELETE = 0x04,
    OPCODE_INCR = 0x05,
    OPCODE_DECR = 0x06,
    OPCODE_NOOP = 0x0A,
    OPCODE_GETKQ = 0x0D,
    OPCODE_APPEND = 0x0E,
    OPCODE_PREPEND = 0x0F,
    OPCODE_SETQ = 0x11,  /* the quiet ops: 0x11-0x16, 0x19, 0x1A */
    OPCODE_DECRQ = 0x16,
    OPCODE_APPENDQ = 0x19,
    OPCODE_PREPENDQ = 0x1A,
};

enum {
    STATUS_OK = 0x0000,
    STATUS_KEY_NOT_FOUND = 0x0001,
    STATUS_KEY_EXISTS = 0x0002,
    STATUS_NOT_STORED = 0x0005,
};

/* The opcode each op's request and reply carry (a multi-get completes with its noop's;
 * a gets is a get); -1: none here (a tokenless cas, a replay skips it: trace_ops.py). */
static const int OPCODES[OP_GETS + 1] = {
    [OP_GET] = OPCODE_GET,         [OP_SET] = OPCODE_SET,         [OP_DELETE] = OPCODE_DELETE,
    [OP_INCR] = OPCODE_INCR,       [OP_DECR] = OPCODE_DECR,       [OP_MGET] = OPCODE_NOOP,
    [OP_ADD] = OPCODE_ADD,         [OP_REPLACE] = OPCODE_REPLACE, [OP_APPEND] = OPCODE_APPEND,
    [OP_PREPEND] = OPCODE_PREPEND, [OP_CAS] = -1,                 [OP_CAS + 1] = -1,
    [OP_GETS] = OPCODE_GET,
};
static const char *const OP_NAMES[OP_GETS + 1] = {
    "GET", "SET", "DELETE", "INCR", "DECR", "MGET", "ADD", "REPLACE", "APPEND", "PREPEND",
    "CAS", "TOUCH", "GETS"};

/* An op this wire encodes (and whose reply it reads). */
static inline int
binary_op(int op)
{
    return op >= 0 && op <= OP_GETS && OPCODES[op] >= 0;
}

static inline uint32_t
be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void
put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* -- replies ------------------------------------------------------------------------- */

typedef struct {
    unsigned opcode, keylen, extlen, status;
    uint32_t body, opaque;
} Packet;

/* One response packet at p, checked in the codec's order (next_reply): magic and body
 * bound with the header, key and extras within the body once it is there. Returns its
 * size, NEED or BAD. */
static Py_ssize_t
packet(const char *p, Py_ssize_t n, long long max, Packet *k, Scan *s)
{
    const unsigned char *h = (const unsigned char *)p;
    if (n < HEADER_BYTES)
        return NEED;
    if (h[0] != MAGIC_RESPONSE)
        return scan_failf(s, NULL, 0, "bad magic byte 0x%02x (expected 0x81)", h[0]);
    k->body = be32(h + 8);
    if (k->body > max)
        return scan_failf(s, NULL, 0, "response body of %lu bytes exceeds %lld",
                          (unsigned long)k->body, max);
    if (n - HEADER_BYTES < (Py_ssize_t)k->body)
        return NEED;
    k->opcode = h[1];
    k->keylen = (unsigned)h[2] << 8 | h[3];
    k->extlen = h[4];
    k->status = (unsigned)h[6] << 8 | h[7];
    k->opaque = be32(h + 12);
    if (k->keylen + k->extlen > k->body)
        return scan_failf(s, NULL, 0, "key (%u) + extras (%u) exceed the body (%lu)", k->keylen,
                          k->extlen, (unsigned long)k->body);
    return HEADER_BYTES + (Py_ssize_t)k->body;
}

static int
is_quiet_opcode(unsigned opcode)
{
    return (opcode >= OPCODE_SETQ && opcode <= OPCODE_DECRQ) || opcode == OPCODE_APPENDQ ||
           opcode == OPCODE_PREPENDQ;
}

/* A packet whose opaque is not the pending request's (the codec's _consume_unannounced):
 * 0 when taken (a getkq answer of the pending multi-get: *hits counts its hits, *acc its
 * bytes), or BAD. */
static int
unannounced(const Packet *k, Py_ssize_t size, const Head *head, uint32_t answered, long long max,
            long long *hits, long long *acc, Scan *s)
{
    /* Answers come in request order: a packet must belong to a request sent after the
     * last one answered and before the oldest one pending. */
    uint32_t bound = head->tag;
    if (!(0 < k->opaque - answered && k->opaque - answered < bound - answered))
        return (int)scan_failf(s, NULL, 0, "response opaque %lu out of order (oldest pending %lu)",
                               (unsigned long)k->opaque, (unsigned long)bound);
    if (k->opcode == OPCODE_GETKQ && head->op == OP_MGET) {
        /* In range is one of its keys: every request before it was answered (the pump
         * sends no quiet op), so the range is its getkq opaques, or what remains of them. */
        *hits += k->status == STATUS_OK;
        *acc += size;
        if (*acc > max)
            return (int)scan_failf(s, NULL, 0, "reply of more than %lld bytes", max);
        return 0;
    }
    if (is_quiet_opcode(k->opcode)) /* the codec counts a failure aside; no reply */
        return 0;
    return (int)scan_failf(s, NULL, 0, "unexpected opcode 0x%02x (opaque %lu) answers no request",
                           k->opcode, (unsigned long)k->opaque);
}

/* The code of the response that completes ``head``'s reply (the codec's status tables). */
static Py_ssize_t
completion(const Packet *k, const Head *head, long long hits, Scan *s)
{
    unsigned status = k->status;
    if (!binary_op(head->op) || head->family > F_ARITH)
        return scan_fail(s, "no compiled scanner for this op");
    if (k->opcode != (unsigned)OPCODES[head->op])
        return scan_failf(s, NULL, 0, "opcode 0x%02x answers a %s request", k->opcode,
                          OP_NAMES[head->op]);
    switch (head->family) {
    case F_GET:
        s->code = status == STATUS_OK             ? K_HIT | 1 << KEYS_SHIFT
                  : status == STATUS_KEY_NOT_FOUND ? K_MISS
                                                   : K_ERROR;
        return 1;
    case F_MGET: /* an error status drops the hits (keys 0), as the codec's error reply */
        s->code = status != STATUS_OK ? K_ERROR : hits ? K_HIT | hits << KEYS_SHIFT : K_MISS;
        return 1;
    case F_STORE: /* the codec's _STATUS_KINDS: what "exists" and "not found" mean per op */
        if (status == STATUS_OK)
            s->code = K_STORED;
        else if (status == STATUS_NOT_STORED)
            s->code = K_NOT_STORED;
        else if (status == STATUS_KEY_EXISTS && head->op == OP_SET)
            s->code = K_EXISTS;
        else if ((status == STATUS_KEY_EXISTS && head->op == OP_ADD) ||
                 (status == STATUS_KEY_NOT_FOUND && head->op == OP_REPLACE))
            s->code = K_NOT_STORED;
        else
            s->code = K_ERROR;
        return 1;
    case F_DELETE:
        s->code = status == STATUS_OK             ? K_DELETED
                  : status == STATUS_KEY_NOT_FOUND ? K_NOT_FOUND
                                                   : K_ERROR;
        return 1;
    default: /* F_ARITH: the new value, 8 bytes */
        if (status == STATUS_OK) {
            uint32_t value = k->body - k->extlen - k->keylen;
            if (value != 8)
                return scan_failf(s, NULL, 0, "incr/decr response value of %lu bytes (expected 8)",
                                  (unsigned long)value);
            s->code = K_VALUE;
        }
        else
            s->code = status == STATUS_KEY_NOT_FOUND ? K_NOT_FOUND : K_ERROR;
        return 1;
    }
}

/* The packets up to and including the one that completes ``head``'s reply. Scanned from
 * the reply's first packet at every read until it is complete, so nothing is kept between
 * reads but the last answered opaque (Scan.answered, updated with a complete reply). */
static Py_ssize_t
scan_binary(const char *p, Py_ssize_t n, const Head *head, long long max, Scan *s)
{
    uint32_t answered = s->answered;
    long long hits = 0, acc = 0;
    Py_ssize_t pos = 0;
    for (;;) {
        Packet k = {0};
        Py_ssize_t size = packet(p + pos, n - pos, max, &k, s);
        if (size <= 0)
            return size;
        if (head == NULL) /* everything sent was answered: no opaque is in range */
            return scan_failf(s, NULL, 0, "response (opaque %lu) with no request pending",
                              (unsigned long)k.opaque);
        if (k.opaque != head->tag) {
            if (unannounced(&k, size, head, answered, max, &hits, &acc, s) < 0)
                return BAD;
            answered = k.opaque;
            pos += size;
            continue;
        }
        if (completion(&k, head, hits, s) < 0)
            return BAD;
        if (head->family == F_GET && k.status == STATUS_OK) { /* the value after the extras */
            s->value_at = pos + HEADER_BYTES + k.extlen + k.keylen;
            s->value_len = (Py_ssize_t)(k.body - k.extlen - k.keylen);
        }
        s->answered = k.opaque;
        return pos + size;
    }
}

/* -- requests ------------------------------------------------------------------------ */

/* A request header: magic, opcode, key length, extras length, body length and opaque;
 * data type, vbucket and cas are zero. */
static void
put_header(Out *o, unsigned opcode, Py_ssize_t keylen, unsigned extlen, Py_ssize_t body,
           uint32_t opaque)
{
    unsigned char *h = (unsigned char *)o->p + o->len;
    memset(h, 0, HEADER_BYTES);
    h[0] = MAGIC_REQUEST;
    h[1] = (unsigned char)opcode;
    h[2] = (unsigned char)(keylen >> 8);
    h[3] = (unsigned char)keylen;
    h[4] = (unsigned char)extlen;
    put_be32(h + 8, (uint32_t)body);
    put_be32(h + 12, opaque);
    o->len += HEADER_BYTES;
}

/* The header's fields hold a key of at most 65535 bytes and a body below 4 GiB. */
static int
check_lengths(Py_ssize_t keylen, long long body)
{
    if (keylen > 0xFFFF || body > 0xFFFFFFFFLL) {
        PyErr_Format(PyExc_ValueError,
                     "a binary request holds a key of at most 65535 bytes and a body of at "
                     "most 4294967295 (key %zd, body %lld)",
                     keylen, body);
        return -1;
    }
    return 0;
}

static void
tag_binary(int op, uint32_t keys, Tags *t)
{
    /* A multi-get's getkq take an opaque each; its noop's completes the reply. */
    uint32_t used = op == OP_MGET ? keys : 0;
    t->tag = t->next + used;
    t->keys = keys;
    t->next += used + 1;
}

static int
encode_binary(const Encoding *e, int op, const Request *r, Tags *t, Out *o)
{
    uint32_t opaque = t->next;
    const char *k;
    Py_ssize_t kn;
    if (op == OP_MGET) {
        PyObject **items;
        Py_ssize_t count;
        if (multi_get_of(r->keys, HEADER_BYTES, o, &items, &count) < 0)
            return -1;
        for (Py_ssize_t i = 0; i < count; i++) {
            view_of(items[i], &k, &kn);
            if (check_lengths(kn, kn) < 0)
                return -1;
        }
        for (Py_ssize_t i = 0; i < count; i++) {
            view_of(items[i], &k, &kn);
            put_header(o, OPCODE_GETKQ, kn, 0, kn, opaque++);
            put(o, k, kn);
        }
        put_header(o, OPCODE_NOOP, 0, 0, 0, opaque);
        tag_binary(op, (uint32_t)count, t);
        return 0;
    }
    /* set, add, replace: flags and expiry; append, prepend: none (protocol-binary.xml) */
    int flagged = op == OP_SET || op == OP_ADD || op == OP_REPLACE;
    unsigned extlen = flagged ? 8 : op == OP_INCR || op == OP_DECR ? 20 : 0;
    long long body = (long long)extlen + r->key_len + r->value_len;
    if (check_lengths(r->key_len, body) < 0)
        return -1;
    put_header(o, OPCODES[op], r->key_len, extlen, body, opaque);
    unsigned char *x = (unsigned char *)o->p + o->len;
    if (flagged) { /* flags, expiry */
        put_be32(x, (uint32_t)e->flags);
        put_be32(x + 4, (uint32_t)e->ttl);
    }
    else if (extlen) { /* delta 1, initial 0 (64-bit each), expiry all ones: no create */
        memset(x, 0, 20);
        x[7] = 1;
        memset(x + 16, 0xFF, 4);
    }
    o->len += extlen;
    put(o, r->key, r->key_len);
    put(o, r->value, r->value_len);
    tag_binary(op, 0, t);
    return 0;
}

/* The store extras hold flags and expiry as 32-bit unsigned numbers (the codec packs
 * them with struct ">II", which refuses anything else). */
static int
check_binary(const Encoding *e)
{
    if (e->ttl < 0 || e->ttl > 0xFFFFFFFFLL || e->flags < 0 || e->flags > 0xFFFFFFFFLL) {
        PyErr_Format(PyExc_ValueError,
                     "binary requests carry ttl and flags from 0 to 4294967295 (ttl %lld, "
                     "flags %lld)",
                     e->ttl, e->flags);
        return -1;
    }
    return 0;
}

/* Every op with an opcode (OPCODES): not a tokenless cas. */
const Wire binary_wire = {
    scan_binary, encode_binary, tag_binary, check_binary,
    OP_BIT(OP_GET) | OP_BIT(OP_SET) | OP_BIT(OP_DELETE) | OP_BIT(OP_INCR) | OP_BIT(OP_DECR) |
        OP_BIT(OP_MGET) | OP_BIT(OP_ADD) | OP_BIT(OP_REPLACE) | OP_BIT(OP_APPEND) |
        OP_BIT(OP_PREPEND) | OP_BIT(OP_GETS)};
