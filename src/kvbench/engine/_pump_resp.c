/* RESP2 and RESP3 for the pump (the Redis protocol specification): the reply scanner and
 * the request encoder, mirroring protocols/resp.py (the reference; its parser is hiredis).
 *
 * Requests are arrays of bulk strings: GET, SET [EX ttl], DEL, INCR, DECR, MGET, and a
 * replay's SET NX|XX [EX ttl] (add, replace) and APPEND (answered by a length). Replies
 * take hiredis's grammar for numbers and lengths; where hiredis reads past RESP2 (no CRLF
 * check after a bulk string, RESP3 types) the scanner refuses.
 *
 * An arbitrary command's request (--command) comes whole, rendered by its template, and
 * its reply may be any value: scan_value reads every type hiredis reads, RESP3's too, on
 * either protocol, with hiredis's grammar for each (a bulk string's CRLF checked all the
 * same), and refuses a RESP3 attribute, which hiredis returns as a reply of its own.
 *
 * RESP3 (a connection the Python link switched with HELLO 3) sends the same requests and
 * gets the same replies to them, a null as "_" (which RESP2's scanner reads already). What
 * it adds is the push message (">"), which the server may send at any time, between
 * replies: it answers no request, so the scanner skips it whole (Scan.skipped), as the
 * codec does. No other RESP3 type answers these commands: the scanner refuses them.
 */
#include "_pump.h"

#include <math.h>
#include <stdlib.h>

/* -- replies ------------------------------------------------------------------------- */

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
        return scan_fail(s, "RESP protocol error: unknown reply type");
    Py_ssize_t eol = find_crlf(p, n);
    if (eol < 0)
        return n > max ? scan_fail(s, "RESP reply larger than the reply bound") : NEED;
    *type = p[0];
    switch (p[0]) {
    case '+':
    case '-':
        if (memchr(p, '\r', (size_t)eol) != NULL || memchr(p, '\n', (size_t)eol) != NULL)
            return scan_fail(s, "RESP protocol error: CR or LF in a simple string");
        return eol + 2;
    case ':':
        if (parse_ll(p + 1, eol - 1, len) < 0)
            return scan_fail(s, "RESP protocol error: bad integer");
        return eol + 2;
    case '_':
        if (eol != 1)
            return scan_fail(s, "RESP protocol error: bad null");
        *type = '$';
        *len = -1;
        return eol + 2;
    case '$':
        if (parse_ll(p + 1, eol - 1, len) < 0 || *len < -1)
            return scan_fail(s, "RESP protocol error: bad bulk string length");
        if (*len == -1)
            return eol + 2;
        /* Bounded before use, written so that no length can overflow the sum. */
        if (*len > max - (eol + 4))
            return scan_fail(s, "RESP reply larger than the reply bound");
        if (n < eol + 2 + *len + 2)
            return NEED;
        if (memcmp(p + eol + 2 + *len, "\r\n", 2) != 0)
            return scan_fail(s, "RESP protocol error: bulk string not followed by CRLF");
        return eol + 2 + (Py_ssize_t)*len + 2;
    default: /* '*' */
        if (parse_ll(p + 1, eol - 1, len) < 0 || *len < -1 || *len > MAX_ARRAY_ELEMENTS)
            return scan_fail(s, "RESP protocol error: bad array length");
        return eol + 2;
    }
}

/* The item of an array (an MGET's reply, a push message) at p + pos: resp_item's result,
 * or BAD once the items that arrived pass the reply bound (an array that never ends). */
static Py_ssize_t
resp_element(const char *p, Py_ssize_t n, Py_ssize_t pos, long long max, char *type,
             long long *len, Scan *s)
{
    Py_ssize_t k = resp_item(p + pos, n - pos, max - pos, type, len, s);
    if (k == NEED && n > max)
        return scan_fail(s, "RESP reply larger than the reply bound");
    return k;
}

/* -- any value: an arbitrary command's reply ------------------------------------------- */

/* hiredis's bound on aggregates nested in one reply (its reader's stack of tasks): the
 * 1,025th is refused as soon as its header arrives. */
#define MAX_NESTING 1024
/* hiredis copies a double's text into a buffer of this size: a longer one is refused. */
#define DOUBLE_TEXT_MAX 326

static inline int
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Digits from p[*i] on: how many, *i past them, *nonzero set if one is not '0'. */
static Py_ssize_t
skip_digits(const char *p, Py_ssize_t n, Py_ssize_t *i, int *nonzero)
{
    Py_ssize_t start = *i;
    for (; *i < n && is_digit(p[*i]); (*i)++)
        *nonzero |= p[*i] != '0';
    return *i - start;
}

/* A RESP3 double's text (after ','), as hiredis reads it: "inf", "-inf", "nan" or "-nan"
 * in any case; else what strtod reads whole, as hiredis's checks leave it: an optional
 * '-', digits with an optional point (or a point and digits), an optional exponent,
 * finite, and not a non-zero number that underflows to zero. */
static int
double_ok(const char *p, Py_ssize_t n)
{
    if (n >= DOUBLE_TEXT_MAX)
        return 0;
    char text[DOUBLE_TEXT_MAX];
    for (Py_ssize_t k = 0; k < n; k++) /* lowercased, to compare with the words */
        text[k] = (char)(p[k] >= 'A' && p[k] <= 'Z' ? p[k] + 32 : p[k]);
    text[n] = '\0';
    if (strcmp(text, "inf") == 0 || strcmp(text, "-inf") == 0 || strcmp(text, "nan") == 0 ||
        strcmp(text, "-nan") == 0)
        return 1;
    Py_ssize_t i = text[0] == '-';
    int nonzero = 0;
    Py_ssize_t digits = skip_digits(text, n, &i, &nonzero);
    if (i < n && text[i] == '.') {
        i++;
        digits += skip_digits(text, n, &i, &nonzero);
    }
    if (digits == 0)
        return 0;
    if (i < n && text[i] == 'e') {
        i++;
        i += i < n && (text[i] == '+' || text[i] == '-');
        int ignored = 0;
        if (skip_digits(text, n, &i, &ignored) == 0)
            return 0;
    }
    if (i != n)
        return 0;
    double d = strtod(text, NULL); /* (the grammar above is the C locale's) */
    return isfinite(d) && (d != 0 || !nonzero);
}

/* The bytes so far end inside the value: NEED, or BAD once they pass the reply bound. */
static Py_ssize_t
value_need(Py_ssize_t n, long long max, Scan *s)
{
    return n > max ? scan_fail(s, "RESP reply larger than the reply bound") : NEED;
}

/* One whole value of any type (an arbitrary command's reply): consumed, NEED or BAD; the
 * code is K_ERROR for an error reply, K_OK for any other value, as the codec's
 * _on_command has it. Aggregates are walked with a stack of the items each still owes
 * (a map's: two per entry, its keys at even counts). As in hiredis, a map key that is
 * an aggregate (not a null) is refused (hiredis-py cannot hash it) as soon as its header
 * arrives, and so is an aggregate nested deeper than MAX_NESTING. */
static Py_ssize_t
scan_value(const char *p, Py_ssize_t n, long long max, Scan *s)
{
    long long left[MAX_NESTING + 1];
    unsigned char map[MAX_NESTING + 1];
    int depth = 0, error_reply = 0;
    left[0] = 1;
    map[0] = 0;
    Py_ssize_t pos = 0;
    for (;;) {
        while (depth > 0 && left[depth] == 0)
            depth--;
        if (left[depth] == 0)
            break;
        int key = map[depth] && left[depth] % 2 == 0;
        left[depth]--;
        if (pos >= n)
            return value_need(n, max, s);
        const char *q = p + pos;
        char type = q[0];
        if (memchr("+-:_$*,#(=%~>|", type, 14) == NULL)
            return scan_fail(s, "RESP protocol error: unknown reply type");
        if (type == '|')
            return scan_fail(s, "RESP3 attribute: not read (hiredis takes it for a reply)");
        Py_ssize_t eol = find_crlf(q, n - pos);
        if (eol < 0)
            return value_need(n, max, s);
        const char *line = q + 1;
        Py_ssize_t line_len = eol - 1;
        long long len = 0;
        switch (type) {
        case '+':
        case '-':
            if (memchr(q, '\r', (size_t)eol) != NULL || memchr(q, '\n', (size_t)eol) != NULL)
                return scan_fail(s, "RESP protocol error: CR or LF in a simple string");
            error_reply = type == '-' && pos == 0;
            break;
        case ':':
            if (parse_ll(line, line_len, &len) < 0)
                return scan_fail(s, "RESP protocol error: bad integer");
            break;
        case '_':
            if (line_len != 0)
                return scan_fail(s, "RESP protocol error: bad null");
            break;
        case ',':
            if (!double_ok(line, line_len))
                return scan_fail(s, "RESP protocol error: bad double");
            break;
        case '#':
            if (line_len != 1 || memchr("tTfF", line[0], 4) == NULL)
                return scan_fail(s, "RESP protocol error: bad boolean");
            break;
        case '(': { /* an optional '-' and digits, none at all too (hiredis) */
            Py_ssize_t i = line_len > 0 && line[0] == '-';
            int ignored = 0;
            skip_digits(line, line_len, &i, &ignored);
            if (i != line_len)
                return scan_fail(s, "RESP protocol error: bad big number");
            break;
        }
        case '$':
        case '=':
            if (parse_ll(line, line_len, &len) < 0 || len < -1)
                return scan_fail(s, "RESP protocol error: bad bulk string length");
            if (len == -1)
                break;
            if (len > max - (pos + eol + 4))
                return scan_fail(s, "RESP reply larger than the reply bound");
            if (n - pos < eol + 2 + len + 2)
                return value_need(n, max, s);
            if (memcmp(q + eol + 2 + len, "\r\n", 2) != 0)
                return scan_fail(s, "RESP protocol error: bulk string not followed by CRLF");
            if (type == '=' && (len < 4 || q[eol + 2 + 3] != ':'))
                return scan_fail(s, "RESP protocol error: a verbatim string without its format");
            pos += (Py_ssize_t)len + 2;
            break;
        default: /* an aggregate: '*' '%' '~' '>' */
            if (parse_ll(line, line_len, &len) < 0 || len < -1 || len > MAX_ARRAY_ELEMENTS)
                return scan_fail(s, "RESP protocol error: bad aggregate length");
            if (len == -1)
                break;
            if (key)
                return scan_fail(s, "RESP protocol error: a map key that is an aggregate");
            if (depth == MAX_NESTING)
                return scan_fail(s, "RESP protocol error: aggregates nested too deep");
            depth++;
            map[depth] = type == '%';
            left[depth] = type == '%' ? 2 * len : len;
        }
        pos += eol + 2;
    }
    s->code = error_reply ? K_ERROR : K_OK;
    return pos;
}

static Py_ssize_t
scan_resp2(const char *p, Py_ssize_t n, const Head *head, long long max, Scan *s)
{
    if (head == NULL)
        return scan_no_request(s);
    int family = head->family;
    if (family == F_COMMAND)
        return scan_value(p, n, max, s);
    static const char *const what[F_COUNT] = {"?",   "GET",       "MGET",   "SET",
                                              "DEL", "INCR/DECR", "APPEND", "a command"};
    char type;
    long long len = 0;
    Py_ssize_t r = resp_item(p, n, max, &type, &len, s);
    if (r <= 0)
        return r;
    if (type == '-') {
        if (r > max)
            return scan_fail(s, "RESP error reply larger than the reply bound");
        s->code = K_ERROR;
        return r;
    }
    int null = (type == '$' || type == '*') && len == -1;
    switch (family) {
    case F_GET:
        if (type == '$' || type == '+') {
            s->code = null ? K_MISS : (K_HIT | 1 << KEYS_SHIFT);
            if (!null) { /* the bulk string's bytes, or the simple string's */
                s->value_len = type == '$' ? (Py_ssize_t)len : r - 3;
                s->value_at = r - 2 - s->value_len;
            }
            return r;
        }
        if (null) {
            s->code = K_MISS;
            return r;
        }
        break;
    case F_STORE:
        /* A null refuses a SET NX|XX (add, replace) only: a plain SET cannot get one. */
        if (null && head->op != OP_SET) {
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
    case F_APPEND: /* the value's new length */
        if (type == ':') {
            s->code = K_STORED;
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
                Py_ssize_t k = resp_element(p, n, pos, max, &item_type, &item_len, s);
                if (k <= 0)
                    return k;
                if (item_type == '$' || item_type == '+')
                    hits += !(item_type == '$' && item_len == -1);
                else if (!(item_type == '*' && item_len == -1))
                    return scan_fail(s, "an MGET element is not a bulk string or null");
                pos += k;
            }
            s->code = hits ? (K_HIT | hits << KEYS_SHIFT) : K_MISS;
            return pos;
        }
        break;
    }
    return scan_failf(s, NULL, 0, "a reply of type %c cannot answer %s", type, what[family]);
}

/* RESP3: a push message at p ('>' and its count, then that many items: RESP2's, arrays
 * nested) is consumed whole, answering no request; anything else is a RESP2 reply. The
 * messages Redis pushes (pub/sub, client tracking's invalidations) are arrays of bulk
 * strings, integers and nulls; the other RESP3 types are refused in them too. */
static Py_ssize_t
scan_resp3(const char *p, Py_ssize_t n, const Head *head, long long max, Scan *s)
{
    if (n < 1 || p[0] != '>')
        return scan_resp2(p, n, head, max, s);
    Py_ssize_t eol = find_crlf(p, n);
    if (eol < 0)
        return n > max ? scan_fail(s, "RESP reply larger than the reply bound") : NEED;
    long long left;
    if (parse_ll(p + 1, eol - 1, &left) < 0 || left < 0 || left > MAX_ARRAY_ELEMENTS)
        return scan_fail(s, "RESP protocol error: bad push message length");
    Py_ssize_t pos = eol + 2;
    while (left > 0) {
        char type;
        long long len = 0;
        Py_ssize_t k = resp_element(p, n, pos, max, &type, &len, s);
        if (k <= 0)
            return k;
        pos += k;
        left--;
        if (type == '*' && len > 0) { /* its items follow; bounded by the reply bound */
            if (len > max - left)
                return scan_fail(s, "RESP reply larger than the reply bound");
            left += len;
        }
    }
    s->skipped = 1;
    return pos;
}

/* -- requests ------------------------------------------------------------------------ */

/* A multi-get: "*<n+1>" "MGET" then each key as a bulk string. */
static int
put_resp_mget(MultiGet *m, Tags *t, Out *o)
{
    PUT_LITERAL(o, "*");
    put_ll(o, m->count + 1);
    PUT_LITERAL(o, "\r\n$4\r\nMGET\r\n");
    while (mget_next(m))
        put_bulk(o, m->key, m->key_len);
    return 0;
}

/* A SET's array header and name, by its count of bulk strings less 3. */
static const Words set_heads[] = {
    WORDS("*3\r\n$3\r\nSET\r\n"), WORDS("*4\r\n$3\r\nSET\r\n"),
    WORDS("*5\r\n$3\r\nSET\r\n"), WORDS("*6\r\n$3\r\nSET\r\n")};

/* SET k v [NX|XX] [EX ttl] (add: NX, replace: XX), or APPEND k v. */
static void
put_resp_store(const Encoding *e, int op, const Request *r, Tags *t, Out *o)
{
    if (op == OP_APPEND) {
        PUT_LITERAL(o, "*3\r\n$6\r\nAPPEND\r\n");
    }
    else {
        put_words(o, set_heads[(op != OP_SET) + 2 * (e->ttl != 0)]);
    }
    put_bulk(o, r->key, r->key_len);
    put_bulk(o, r->value, r->value_len);
    if (op == OP_ADD)
        PUT_LITERAL(o, "$2\r\nNX\r\n");
    else if (op == OP_REPLACE)
        PUT_LITERAL(o, "$2\r\nXX\r\n");
    if (e->ttl && op != OP_APPEND) {
        char digits[24];
        char *ttl = format_ll(e->ttl, digits + sizeof digits);
        PUT_LITERAL(o, "$2\r\nEX\r\n");
        put_bulk(o, ttl, digits + sizeof digits - ttl);
    }
}

/* The single-key commands: the array's header and command name, then the key. */
static const Encoder resp2_encoder = {
    .words = {
        [OP_GET] = {WORDS("*2\r\n$3\r\nGET\r\n"), WORDS("")},
        [OP_DELETE] = {WORDS("*2\r\n$3\r\nDEL\r\n"), WORDS("")},
        [OP_INCR] = {WORDS("*2\r\n$4\r\nINCR\r\n"), WORDS("")},
        [OP_DECR] = {WORDS("*2\r\n$4\r\nDECR\r\n"), WORDS("")},
    },
    .bulk_key = 1,
    .mget = put_resp_mget,
    .mget_per_key = 32,
    .store = put_resp_store,
};

DEFINE_ENCODE(encode_resp2, resp2_encoder)

/* No opaques, no settings to check; no Redis form for gets, prepend and cas; a command
 * (its request rendered whole: encode_request writes it). */
#define RESP_OPS                                                                          \
    (OP_BIT(OP_GET) | OP_BIT(OP_SET) | OP_BIT(OP_DELETE) | OP_BIT(OP_INCR) | OP_BIT(OP_DECR) | \
     OP_BIT(OP_MGET) | OP_BIT(OP_ADD) | OP_BIT(OP_REPLACE) | OP_BIT(OP_APPEND) |           \
     OP_BIT(OP_COMMAND))
const Wire resp2_wire = {scan_resp2, encode_resp2, NULL, NULL, RESP_OPS};
/* The same requests: RESP3 changes replies only. */
const Wire resp3_wire = {scan_resp3, encode_resp2, NULL, NULL, RESP_OPS};
