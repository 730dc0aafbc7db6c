/* memcached meta protocol for the pump (memcached doc/protocol.txt, "Meta Commands"): the
 * reply scanner and the request encoder, mirroring protocols/memcache_meta.py and
 * _memcache_meta_replies.py (the reference).
 *
 * Every request carries an opaque token O<n> (a counter mod 2**32) that its reply must
 * echo: "mg k v O<t>", "ms k <bytes> T<ttl> F<flags> O<t>" + data block, "md k O<t>",
 * "ma k D1 v O<t>", "ma k MD D1 v O<t>"; a multi-get is "mg k v q O<t>" per key (the q
 * flag hides misses) then "mn", whose MN ends the reply; a replay's "mg k v c O<t>" (gets)
 * and "ms ... M<mode>" (add E, replace R, append A, prepend P) or "ms ... C0" (a cas
 * without a token). Value sizes are bounded by
 * max_reply and MAX_SIZE_DIGITS before the data block is waited for.
 */
#include "_pump.h"

/* A return code and the reply kind it means for one family (protocol.txt "Meta Get/Set/
 * Delete/Arithmetic"); a table ends with kind 0. */
typedef struct {
    char code[3];
    int kind;
} Code;

static const Code GET_CODES[] = {{"EN", K_MISS}, {"", 0}};
static const Code STORE_CODES[] = {
    {"HD", K_STORED}, {"NS", K_NOT_STORED}, {"EX", K_EXISTS}, {"NF", K_NOT_FOUND}, {"", 0}};
static const Code DELETE_CODES[] = {
    {"HD", K_DELETED}, {"NF", K_NOT_FOUND}, {"EX", K_EXISTS}, {"", 0}};
static const Code ARITH_CODES[] = {
    {"NF", K_NOT_FOUND}, {"NS", K_NOT_STORED}, {"EX", K_EXISTS}, {"", 0}};
static const Code NO_CODES[] = {{"", 0}};

/* A token's decimal digits, as the codec writes and compares them ("%d"). */
typedef struct {
    char digits[24];
    const char *p;
    Py_ssize_t n;
} Token;

static void
token_of(uint32_t value, Token *t)
{
    t->p = format_ll(value, t->digits + sizeof t->digits);
    t->n = t->digits + sizeof t->digits - t->p;
}

/* -- replies ------------------------------------------------------------------------- */

static inline int
upper(char c)
{
    return c >= 'A' && c <= 'Z';
}

/* One status line (the codec's _status): an error line, or "XX [flags]" whose O flag, if
 * any, is ``token`` (NULL: the request has none, so any O flag is someone else's) and
 * whose code is in ``codes``. Quiet failures (another request's token) cannot be: the
 * pump sends no quiet request, so a wrong token is a mismatch, as in the codec then. */
static Py_ssize_t
meta_status(const char *p, Py_ssize_t n, const Token *token, const Code *codes, long long max,
            Scan *s)
{
    Py_ssize_t eol = find_crlf(p, n);
    if (eol < 0)
        return n > max ? scan_fail(s, "no line end within the reply bound") : NEED;
    if (eol + 2 > max)
        return scan_fail(s, "reply line longer than the reply bound");
    if (is_error_line(p, eol)) {
        s->code = K_ERROR;
        return eol + 2;
    }
    /* split_meta_status: two capital letters, then space-separated flags, none empty */
    if (eol < 2 || !upper(p[0]) || !upper(p[1]) || (eol > 2 && p[2] != ' '))
        return scan_failf(s, p, eol, "not a meta reply: ");
    const char *echoed = NULL;
    Py_ssize_t echoed_len = 0;
    for (Py_ssize_t i = 3; i <= eol && eol > 2;) {
        const char *space = memchr(p + i, ' ', (size_t)(eol - i));
        Py_ssize_t j = space != NULL ? space - p : eol;
        if (j == i || (j - i == 1 && p[i] == 'O'))
            return scan_failf(s, p, eol, "bad flags in meta reply: ");
        if (p[i] == 'O') { /* the last O flag is the token, as in the codec */
            echoed = p + i + 1;
            echoed_len = j - i - 1;
        }
        i = j + 1;
    }
    if (echoed != NULL && (token == NULL || echoed_len != token->n ||
                           memcmp(echoed, token->p, (size_t)echoed_len) != 0))
        return scan_failf(s, p, eol, "opaque mismatch: expected O%.*s, got ",
                          token ? (int)token->n : 0, token ? token->p : "");
    for (const Code *c = codes; c->kind; c++)
        if (p[0] == c->code[0] && p[1] == c->code[1]) {
            s->code = c->kind;
            return eol + 2;
        }
    return scan_failf(s, p, eol, "unexpected meta reply ");
}

/* The value of a declared size of 1-18 digits. */
static long long
size_value(const char *p, Py_ssize_t n)
{
    long long size = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        size = size * 10 + (p[i] - '0');
    return size;
}

/* "VA <size> [flags] O<t>\r\n<data>\r\n" (the codec's _value; the caller saw "VA "). */
static Py_ssize_t
meta_value(const char *p, Py_ssize_t n, const Token *token, long long code, long long max,
           Scan *s)
{
    Py_ssize_t eol = find_crlf(p, n);
    if (eol < 0)
        return n > max ? scan_fail(s, "reply line longer than the reply bound") : NEED;
    Py_ssize_t at = eol - token->n - 2; /* where " O<t>" must start: the line's end */
    if (at < 0 || memcmp(p + at, " O", 2) != 0 || memcmp(p + at + 2, token->p, token->n) != 0)
        return scan_failf(s, p, eol, "VA without our opaque b'O%.*s': ", (int)token->n,
                          token->p);
    const char *size = p + 3;
    Py_ssize_t size_len = at > 3 ? at - 3 : 0;
    const char *space = memchr(size, ' ', (size_t)size_len);
    if (space != NULL) /* flags before the token */
        size_len = space - size;
    if (!all_digits(size, size_len) || size_len > MAX_SIZE_DIGITS)
        return scan_failf(s, p, eol, "bad VA line: ");
    long long end = eol + 2 + size_value(size, size_len);
    if (end + 2 > max) /* checked on the declared size, before the data block is there */
        return scan_failf(s, NULL, 0, "reply of %lld bytes, bound %lld", end + 2, max);
    if (n < end + 2)
        return NEED;
    if (memcmp(p + end, "\r\n", 2) != 0)
        return scan_fail(s, "data block not followed by CRLF");
    s->code = code;
    s->value_at = eol + 2;
    s->value_len = (Py_ssize_t)end - (eol + 2);
    return (Py_ssize_t)end + 2;
}

/* The integer of an echoed token, or -1 if it is not one of ours (meta_token). */
static long long
token_value(const char *p, Py_ssize_t n)
{
    if (n <= 0 || n > 10 || !all_digits(p, n))
        return -1;
    long long value = size_value(p, n);
    return value <= 0xFFFFFFFFLL ? value : -1;
}

/* A multi-get (the codec's _parse_mget): "VA <size> O<t>" blocks for the hits, tokens
 * rising within the request's, error lines (each fails one mg), then MN. */
static Py_ssize_t
meta_mget(const char *p, Py_ssize_t n, const Head *head, long long max, Scan *s)
{
    uint32_t following = head->tag, end_token = head->tag + head->keys;
    long long hits = 0;
    int failed = 0;
    Py_ssize_t pos = 0;
    for (;;) {
        const char *q = p + pos;
        Py_ssize_t left = n - pos;
        if (starts(q, left, "VA ")) {
            Py_ssize_t eol = find_crlf(q, left);
            if (eol < 0)
                return n > max ? scan_fail(s, "multi-get reply larger than the reply bound")
                               : NEED;
            /* exactly two fields: the size and the O flag */
            const char *size = q + 3, *space = memchr(size, ' ', (size_t)(eol - 3));
            if (space == NULL)
                return scan_failf(s, q, eol, "bad VA line in multi-get: ");
            const char *flag = space + 1;
            Py_ssize_t size_len = space - size, flag_len = q + eol - flag;
            if (memchr(flag, ' ', (size_t)flag_len) != NULL || !all_digits(size, size_len) ||
                size_len > MAX_SIZE_DIGITS || flag_len < 1 || flag[0] != 'O')
                return scan_failf(s, q, eol, "bad VA line in multi-get: ");
            long long token = token_value(flag + 1, flag_len - 1);
            if (token < 0 || (uint32_t)token - following >= end_token - following)
                return scan_failf(s, flag, flag_len, "VA with a token not in this multi-get: ");
            long long end = eol + 2 + size_value(size, size_len);
            if (pos + end + 2 + 4 > max) /* + MN CRLF */
                return scan_fail(s, "multi-get reply larger than the reply bound");
            if (left < end + 2)
                return NEED;
            if (memcmp(q + end, "\r\n", 2) != 0)
                return scan_fail(s, "data block not followed by CRLF");
            following = (uint32_t)token + 1;
            hits++;
            pos += (Py_ssize_t)end + 2;
            continue;
        }
        if (starts(q, left, "MN\r\n")) {
            s->code = (failed ? K_ERROR : hits ? K_HIT : K_MISS) | hits << KEYS_SHIFT;
            return pos + 4;
        }
        /* Only an error line passes here (no code answers a multi-get): one mg failed (a
         * bad key), and MN still follows. */
        Py_ssize_t r = meta_status(q, left, NULL, NO_CODES, max, s);
        if (r <= 0)
            return r;
        failed = 1;
        pos += r;
    }
}

static Py_ssize_t
scan_meta(const char *p, Py_ssize_t n, const Head *head, long long max, Scan *s)
{
    if (head == NULL) /* the codec's _unsolicited: no quiet request was sent */
        return scan_no_request(s);
    if (head->family == F_MGET)
        return meta_mget(p, n, head, max, s);
    if (head->family > F_ARITH) /* RESP's */
        return scan_fail(s, "no compiled scanner for this op");
    Token token;
    token_of(head->tag, &token);
    const char *success = head->family == F_GET      ? "EN"
                          : head->family == F_ARITH ? NULL
                                                     : "HD";
    /* The usual line, "EN O<t>" to a get, "HD O<t>" to a set or delete, as the codec's
     * own shortcut takes it. */
    if (success != NULL && n >= token.n + 6 && memcmp(p, success, 2) == 0 &&
        memcmp(p + 2, " O", 2) == 0 && memcmp(p + 4, token.p, token.n) == 0 &&
        memcmp(p + 4 + token.n, "\r\n", 2) == 0) {
        s->code = head->family == F_GET ? K_MISS : head->family == F_STORE ? K_STORED : K_DELETED;
        return token.n + 6;
    }
    switch (head->family) {
    case F_GET:
        if (starts(p, n, "VA "))
            return meta_value(p, n, &token, K_HIT | 1 << KEYS_SHIFT, max, s);
        return meta_status(p, n, &token, GET_CODES, max, s);
    case F_ARITH:
        if (starts(p, n, "VA "))
            return meta_value(p, n, &token, K_VALUE, max, s);
        return meta_status(p, n, &token, ARITH_CODES, max, s);
    case F_STORE:
        return meta_status(p, n, &token, STORE_CODES, max, s);
    default:
        return meta_status(p, n, &token, DELETE_CODES, max, s);
    }
}

/* -- requests ------------------------------------------------------------------------ */

static void
tag_meta(int op, uint32_t keys, Tags *t)
{
    /* A multi-get takes a token per key; its reply is checked from the first. */
    t->tag = t->next;
    t->keys = keys;
    t->next += op == OP_MGET ? keys : 1;
}

/* " O<t>\r\n" */
static void
put_token(Out *o, uint32_t value)
{
    PUT_LITERAL(o, " O");
    put_ll(o, value);
    PUT_LITERAL(o, "\r\n");
}

/* A multi-get: "mg k v q O<t>\r\n" per key (a token each), then "mn\r\n". */
static int
put_meta_mget(MultiGet *m, Tags *t, Out *o)
{
    uint32_t token = t->next;
    if (m->count == 0) {
        PyErr_SetString(PyExc_ValueError, "MGET needs at least one key");
        return -1;
    }
    while (mget_next(m)) {
        PUT_LITERAL(o, "mg ");
        put(o, m->key, m->key_len);
        PUT_LITERAL(o, " v q");
        put_token(o, token++);
    }
    PUT_LITERAL(o, "mn\r\n");
    tag_meta(OP_MGET, (uint32_t)m->count, t);
    return 0;
}

/* "ms k <bytes> T<ttl> F<flags>[ <mode>] O<t>\r\n" + data block. */
static void
put_meta_store(const Encoding *e, int op, const Request *r, Tags *t, Out *o);

/* A single-key request's token, then its tags. */
static void
close_meta(int op, Tags *t, Out *o)
{
    put_token(o, t->next);
    tag_meta(op, 0, t);
}

/* A store's first word is its mode flag (protocol.txt "Meta Set": E add, R replace, A
 * append, P prepend), or a replay's tokenless cas: "C0" (workload/trace_ops.py). */
static const Encoder meta_encoder = {
    .words = {
        [OP_GET] = {WORDS("mg "), WORDS(" v")},
        [OP_GETS] = {WORDS("mg "), WORDS(" v c")}, /* with its cas value */
        [OP_DELETE] = {WORDS("md "), WORDS("")},
        [OP_INCR] = {WORDS("ma "), WORDS(" D1 v")}, /* one step, the new value returned */
        [OP_DECR] = {WORDS("ma "), WORDS(" MD D1 v")},
        [OP_SET] = {WORDS("")}, [OP_ADD] = {WORDS(" ME")}, [OP_REPLACE] = {WORDS(" MR")},
        [OP_APPEND] = {WORDS(" MA")}, [OP_PREPEND] = {WORDS(" MP")}, [OP_CAS] = {WORDS(" C0")},
    },
    .mget = put_meta_mget,
    .mget_per_key = 32,
    .store = put_meta_store,
    .close = close_meta,
};

static void
put_meta_store(const Encoding *e, int op, const Request *r, Tags *t, Out *o)
{
    PUT_LITERAL(o, "ms ");
    put(o, r->key, r->key_len);
    PUT_FIELD(o, " ", r->value_len);
    PUT_FIELD(o, " T", e->ttl);
    PUT_FIELD(o, " F", e->flags);
    put_words(o, meta_encoder.words[op][0]);
    close_meta(op, t, o);
    put_data_block(o, r);
}

DEFINE_ENCODE(encode_meta, meta_encoder)

/* Any ttl and flags are written as the codec writes them ("%d"). */
const Wire meta_wire = {
    scan_meta, encode_meta, tag_meta, NULL,
    MEMCACHED_OPS};
