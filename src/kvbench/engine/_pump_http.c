/* HTTP/1.1 to a memc-style gateway (memcached behind nginx's memc module) for the pump:
 * the response scanner and the request encoder, mirroring protocols/http1.py and
 * protocols/_http_response.py (the reference; tests hold them together).
 *
 * Requests: one keep-alive "GET /<path>?cmd=<command>&key=<key>[&val=<value>]... HTTP/1.1"
 * with a Host field, as the codec's encode_many writes it. The target's start ("GET
 * /<path>?cmd=") and the request's tail (" HTTP/1.1\r\nHost: <host>\r\n\r\n") come from
 * the connection's Encoding (its Stream holds them); keys must be URL-safe (refused with
 * the codec's ValueError), value bytes are mapped to URL-safe ones (VALUE_TABLE).
 *
 * Responses are framed per RFC 9112 as the codec frames them: the status line and header
 * fields (16 KiB at most), then a Content-Length, chunked or close-delimited body; 1xx
 * interim responses are skipped, 101 refused. A close-delimited body ends only at EOF,
 * which the load engine never feeds a codec either: it stays incomplete, and the request
 * ends with its connection. A response that announces the connection's close
 * (Connection: close, HTTP/1.0 without keep-alive, a close-delimited body) sets
 * Scan.closing: the pump sends nothing more there, and bytes after it are an error.
 *
 * The scanner is stateless: an incomplete response is scanned again from its start when
 * more bytes come (a head is ~150 bytes; a chunked body's chunks are walked again).
 */
#include "_pump.h"
#include <ctype.h>

/* -- replies ------------------------------------------------------------------------- */

/* _http_response.py's bounds: MAX_HEAD_BYTES, MAX_CHUNK_LINE_BYTES, _MAX_LENGTH_DIGITS. */
#define MAX_HEAD_BYTES (16 * 1024)
#define MAX_CHUNK_LINE_BYTES 4096
#define MAX_LENGTH_DIGITS 18
/* HttpHead.framing besides a Content-Length (>= 0). */
#define CHUNKED (-1)
#define UNTIL_EOF (-2)
/* What a store's 200 body is compared with (memc's refused add/replace/append). */
#define NOT_STORED_BODY "NOT_STORED"

typedef struct {
    int status;
    long long framing;
    int close;
} HttpHead;

/* RFC 9110 section 5.6.2's tchar: what a field name is made of. */
static int
is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("!#$%&'*+.^_`|~-", c) != NULL);
}

/* What Python's bytes.strip() strips. */
static int
is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static void
strip(const char **p, Py_ssize_t *n)
{
    while (*n > 0 && is_space(**p)) {
        (*p)++;
        (*n)--;
    }
    while (*n > 0 && is_space((*p)[*n - 1]))
        (*n)--;
}

/* Whether p[0:n], ASCII-lowercased, is ``word`` (lower case). */
static int
lower_is(const char *p, Py_ssize_t n, const char *word)
{
    if ((size_t)n != strlen(word))
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = p[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != word[i])
            return 0;
    }
    return 1;
}

/* One field line at p (up to its CRLF, which find_crlf found at ``eol``): a token, ':',
 * then no CR or LF (RFC 9110 5.1, 5.5; obs-fold is refused). The colon's index, or -1. */
static Py_ssize_t
field_colon(const char *p, Py_ssize_t eol)
{
    Py_ssize_t i = 0;
    while (i < eol && is_tchar((unsigned char)p[i]))
        i++;
    if (i == 0 || i == eol || p[i] != ':')
        return -1;
    for (Py_ssize_t j = i + 1; j < eol; j++)
        if (p[j] == '\r' || p[j] == '\n')
            return -1;
    return i;
}

/* Whether the comma-separated list p[0:n] holds ``token`` (each item stripped). */
static int
has_token(const char *p, Py_ssize_t n, const char *token)
{
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 0; i <= n; i++) {
        if (i == n || p[i] == ',') {
            const char *item = p + start;
            Py_ssize_t len = i - start;
            strip(&item, &len);
            if (lower_is(item, len, token))
                return 1;
            start = i + 1;
        }
    }
    return 0;
}

/* One Content-Length field's value (a list of equal numbers is allowed: RFC 9110 8.6),
 * agreeing with ``*seen`` (-1: none yet); BAD with the codec's message. */
static Py_ssize_t
content_length(const char *value, Py_ssize_t n, long long *seen, Scan *s)
{
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 0; i <= n; i++) {
        if (i < n && value[i] != ',')
            continue;
        const char *part = value + start;
        Py_ssize_t len = i - start;
        strip(&part, &len);
        if (!all_digits(part, len) || len > MAX_LENGTH_DIGITS)
            return scan_failf(s, value, n < 40 ? n : 40, "bad Content-Length ");
        long long number = 0;
        for (Py_ssize_t j = 0; j < len; j++)
            number = number * 10 + (part[j] - '0');
        if (*seen >= 0 && number != *seen)
            return scan_failf(s, NULL, 0, "conflicting Content-Length values %lld and %lld",
                              *seen, number);
        *seen = number;
        start = i + 1;
    }
    return 0;
}

/* _http_response.parse_head over p[0:n] (the status line and fields, each with its
 * CRLF): 0, or BAD with the codec's message. */
static Py_ssize_t
parse_head(const char *p, Py_ssize_t n, long long max, HttpHead *h, Scan *s)
{
    /* RFC 9112 section 4: HTTP-version SP status-code SP [reason-phrase] CRLF (a missing
     * SP before an empty reason is tolerated). */
    Py_ssize_t eol = find_crlf(p, n);
    int line_ok = eol >= 12 && memcmp(p, "HTTP/1.", 7) == 0 && (p[7] == '0' || p[7] == '1') &&
                  p[8] == ' ' && p[9] >= '1' && p[9] <= '9' && all_digits(p + 10, 2) &&
                  (eol == 12 || p[12] == ' ');
    for (Py_ssize_t i = 13; line_ok && i < eol; i++)
        line_ok = p[i] != '\r' && p[i] != '\n';
    if (!line_ok)
        return scan_failf(s, p, n < 60 ? n : 60, "not an HTTP/1.x status line: ");
    int status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    int http10 = p[7] == '0';
    long long length = -1;
    int keep_alive = 0, close = 0, codings = 0, chunked = 0;
    Py_ssize_t at = eol + 2;
    while (at < n) {
        const char *line = p + at;
        Py_ssize_t end = find_crlf(line, n - at);
        Py_ssize_t colon = end < 0 ? -1 : field_colon(line, end);
        if (colon < 0)
            return scan_failf(s, line, (n - at) < 80 ? n - at : 80,
                              "malformed header field in ");
        const char *value = line + colon + 1;
        Py_ssize_t len = end - colon - 1;
        while (len > 0 && (*value == ' ' || *value == '\t')) {
            value++;
            len--;
        }
        while (len > 0 && (value[len - 1] == ' ' || value[len - 1] == '\t'))
            len--;
        if (lower_is(line, colon, "connection")) {
            close |= has_token(value, len, "close");
            keep_alive |= has_token(value, len, "keep-alive");
        }
        else if (lower_is(line, colon, "transfer-encoding")) {
            /* Only a final "chunked" frames: the last coding of the last such field. */
            const char *last = value;
            Py_ssize_t last_len = len;
            for (Py_ssize_t i = len - 1; i >= 0; i--)
                if (value[i] == ',') {
                    last = value + i + 1;
                    last_len = len - i - 1;
                    break;
                }
            strip(&last, &last_len);
            codings = 1;
            chunked = lower_is(last, last_len, "chunked");
        }
        else if (lower_is(line, colon, "content-length")) {
            if (content_length(value, len, &length, s) < 0)
                return BAD;
        }
        at += end + 2;
    }
    if (status == 101)
        return scan_fail(s, "101 Switching Protocols: no upgrade was asked for");
    h->status = status;
    h->close = close || (http10 && !keep_alive);
    if (status < 200 || status == 204 || status == 304)
        h->framing = 0; /* RFC 9112 section 6.3, rule 1: never a body */
    else if (codings)   /* rule 4: Transfer-Encoding wins over Content-Length */
        h->framing = chunked ? CHUNKED : UNTIL_EOF;
    else if (length >= 0) {
        if (length > max)
            return scan_failf(s, NULL, 0, "Content-Length %lld is above %lld bytes", length,
                              max);
        h->framing = length;
    }
    else
        h->framing = UNTIL_EOF;
    if (h->framing == UNTIL_EOF)
        h->close = 1;
    return 0;
}

/* A hex digit's value (isxdigit checked). */
static inline unsigned
hex_value(char c)
{
    return (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
}

/* The CRLF ending the chunk line at p, -1 if it is not here yet; BAD (message set) past
 * MAX_CHUNK_LINE_BYTES. */
static Py_ssize_t
chunk_line_end(const char *p, Py_ssize_t n, Scan *s)
{
    Py_ssize_t eol = find_crlf(p, n);
    if ((eol < 0 && n > MAX_CHUNK_LINE_BYTES) || eol > MAX_CHUNK_LINE_BYTES) {
        scan_fail(s, "chunk line longer than 4096 bytes");
        return BAD - 1; /* told apart from "not here yet" */
    }
    return eol;
}

/* A chunked body at p (_http_response.scan_chunks): the offset just past it, trailer
 * included, or NEED / BAD. Its data's size goes to ``*data_len``, and its first bytes (up
 * to sizeof NOT_STORED_BODY - 1) to ``first`` (``*first_len`` of them), for a store's 200. */
static Py_ssize_t
chunked_end(const char *p, Py_ssize_t n, long long max, char *first, Py_ssize_t *first_len,
            Py_ssize_t *data_len, Scan *s)
{
    Py_ssize_t at = 0;
    unsigned long long size = 0;
    *first_len = 0;
    for (;;) { /* chunk-size [ext] CRLF, data CRLF; until a zero-size chunk */
        Py_ssize_t eol = chunk_line_end(p + at, n - at, s);
        if (eol < -1)
            return BAD;
        if (eol < 0)
            return NEED;
        const char *line = p + at;
        Py_ssize_t digits = 0;
        unsigned long long chunk = 0;
        while (digits < eol && digits < 17 && isxdigit((unsigned char)line[digits]))
            chunk = chunk * 16 + hex_value(line[digits++]); /* (17 digits: refused below) */
        Py_ssize_t i = digits;
        while (i < eol && (line[i] == ' ' || line[i] == '\t'))
            i++;
        int ok = digits >= 1 && digits <= 16 && (i == eol || line[i] == ';') &&
                 memchr(line, '\n', (size_t)eol) == NULL && memchr(line, '\r', (size_t)eol) == NULL;
        if (!ok)
            return scan_failf(s, line, eol < 40 ? eol : 40, "bad chunk-size line ");
        if (chunk == 0) {
            at += eol + 2;
            *data_len = (Py_ssize_t)size;
            break;
        }
        if (chunk > (unsigned long long)max - size)
            return scan_failf(s, NULL, 0, "chunked body above %lld bytes", max);
        Py_ssize_t data = at + eol + 2;
        if ((unsigned long long)(n - data) < chunk + 2)
            return NEED;
        Py_ssize_t end = data + (Py_ssize_t)chunk;
        if (p[end] != '\r' || p[end + 1] != '\n')
            return scan_fail(s, "chunk data not followed by CRLF");
        Py_ssize_t want = (Py_ssize_t)sizeof NOT_STORED_BODY - 1 - *first_len;
        Py_ssize_t take = (Py_ssize_t)chunk < want ? (Py_ssize_t)chunk : want;
        memcpy(first + *first_len, p + data, (size_t)take);
        *first_len += take;
        size += chunk;
        at = end + 2;
    }
    for (;;) { /* trailer fields, then an empty line (RFC 9112 section 7.1.2) */
        Py_ssize_t eol = chunk_line_end(p + at, n - at, s);
        if (eol < -1)
            return BAD;
        if (eol < 0)
            return NEED;
        if (eol == 0)
            return at + 2;
        if (field_colon(p + at, eol) < 0)
            return scan_failf(s, p + at, eol < 40 ? eol : 40, "bad trailer field ");
        at += eol + 2;
    }
}

/* The next chunk of a chunked body chunked_end found complete, at p[0:n]: its size in
 * *chunk and where its data starts (after the size line's CRLF). */
static Py_ssize_t
next_chunk(const char *p, Py_ssize_t n, unsigned long long *chunk)
{
    unsigned long long size = 0;
    for (Py_ssize_t i = 0; i < n && isxdigit((unsigned char)p[i]); i++)
        size = size * 16 + hex_value(p[i]);
    *chunk = size;
    return find_crlf(p, n) + 2;
}

void
http_chunked_join(const char *p, Py_ssize_t n, char *out)
{
    Py_ssize_t at = 0;
    unsigned long long chunk;
    while ((at += next_chunk(p + at, n - at, &chunk)), chunk != 0) {
        memcpy(out, p + at, (size_t)chunk);
        out += chunk;
        at += (Py_ssize_t)chunk + 2;
    }
}

/* The kind of a final response to a request of ``family`` (http1.py's tables); a store's
 * 200 by its body's start (memc answers a refused store 200 NOT_STORED). */
static long long
response_code(int family, int status, const char *body, Py_ssize_t body_len)
{
    switch (family) {
    case F_GET:
        return status == 200 ? (K_HIT | 1 << KEYS_SHIFT) : status == 404 ? K_MISS : K_ERROR;
    case F_STORE:
        if (status == 200)
            return body_len >= (Py_ssize_t)sizeof NOT_STORED_BODY - 1 &&
                           memcmp(body, NOT_STORED_BODY, sizeof NOT_STORED_BODY - 1) == 0
                       ? K_NOT_STORED
                       : K_STORED;
        return status == 201 ? K_STORED : status == 404 ? K_NOT_FOUND : K_ERROR;
    case F_DELETE:
        return status == 200 ? K_DELETED : status == 404 ? K_NOT_FOUND : K_ERROR;
    case F_ARITH:
        return status == 200 || status == 201 ? K_VALUE : status == 404 ? K_NOT_FOUND : K_ERROR;
    }
    return K_ERROR;
}

/* The response at p (1xx interim ones before it skipped), as ResponseFramer.frame and
 * HttpMemcCodec.read_kinds take it. */
static Py_ssize_t
scan_http(const char *p, Py_ssize_t n, const Head *head, long long max, Scan *s)
{
    if (head == NULL)
        return scan_no_request(s);
    Py_ssize_t pos = 0;
    for (;;) {
        const char *q = p + pos;
        Py_ssize_t left = n - pos;
        const char *end = NULL;
        /* The head's end: the first CRLF CRLF. */
        for (const char *c = q; left >= 4 && c <= q + left - 4;) {
            c = memchr(c, '\r', (size_t)(q + left - 3 - c));
            if (c == NULL)
                break;
            if (c[1] == '\n' && c[2] == '\r' && c[3] == '\n') {
                end = c;
                break;
            }
            c++;
        }
        if (end == NULL) {
            Py_ssize_t prefix = left < 7 ? left : 7;
            if (memcmp(q, "HTTP/1.", (size_t)prefix) != 0)
                return scan_failf(s, q, left < 40 ? left : 40, "not an HTTP/1.x response: ");
            if (left > MAX_HEAD_BYTES)
                return scan_fail(s, "response head above 16384 bytes");
            return NEED;
        }
        Py_ssize_t head_len = end - q;
        if (head_len > MAX_HEAD_BYTES)
            return scan_fail(s, "response head above 16384 bytes");
        HttpHead h;
        if (parse_head(q, head_len + 2, max, &h, s) < 0)
            return BAD;
        Py_ssize_t body = head_len + 4;
        Py_ssize_t stop;
        char first[sizeof NOT_STORED_BODY];
        Py_ssize_t first_len = 0, data_len = 0;
        if (h.framing >= 0) {
            if (h.framing > left - body)
                return NEED;
            stop = body + (Py_ssize_t)h.framing;
            first_len = stop - body < (Py_ssize_t)sizeof first ? stop - body
                                                               : (Py_ssize_t)sizeof first;
            memcpy(first, q + body, (size_t)first_len);
        }
        else if (h.framing == CHUNKED) {
            Py_ssize_t k =
                chunked_end(q + body, left - body, max, first, &first_len, &data_len, s);
            if (k <= 0)
                return k;
            stop = body + k;
        }
        else { /* close-delimited: complete only at EOF, which never comes here */
            if (left - body > max)
                return scan_failf(s, NULL, 0, "close-delimited body above %lld bytes", max);
            return NEED;
        }
        if (h.status >= 200) {
            s->code = response_code(head->family, h.status, first, first_len);
            s->closing = h.close;
            if (s->code == (K_HIT | 1 << KEYS_SHIFT)) { /* the value, for --verify */
                s->value_at = pos + body;
                s->value_len = h.framing >= 0 ? stop - body : data_len;
                s->value_chunked = h.framing == CHUNKED;
            }
            return pos + stop;
        }
        pos += stop;
        /* 1xx: an interim response (100 Continue, 103 Early Hints) answers nothing. */
    }
}

/* -- requests ------------------------------------------------------------------------ */

/* _http_url.py: RFC 3986's unreserved characters, and what a key may hold besides. */
static const char UNRESERVED[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~";
#define UNRESERVED_COUNT ((int)sizeof UNRESERVED - 1)
static const char KEY_EXTRA[] = ":@!$'()*,;/";

static unsigned char value_table[256]; /* VALUE_TABLE */
static unsigned char key_safe[256];    /* KEY_SAFE, a flag each */

static void
tables_ready(void);

const unsigned char *
http_value_map(void)
{
    tables_ready();
    return value_table;
}

static void
tables_ready(void)
{
    static int ready = 0;
    if (ready)
        return;
    for (int b = 0; b < 256; b++) {
        int unreserved = b != 0 && memchr(UNRESERVED, b, UNRESERVED_COUNT) != NULL;
        value_table[b] = (unsigned char)(unreserved ? b : UNRESERVED[b % UNRESERVED_COUNT]);
        key_safe[b] = (unsigned char)(unreserved ||
                                      (b != 0 && memchr(KEY_EXTRA, b, sizeof KEY_EXTRA - 1)));
    }
    ready = 1;
}

/* http1.check_key's ValueError for a key that cannot go into the URL; -1. */
static int
bad_key(const char *key, Py_ssize_t n)
{
    PyObject *raw = PyBytes_FromStringAndSize(key, n);
    PyObject *repr = raw != NULL ? PyObject_Repr(raw) : NULL;
    Py_XDECREF(raw);
    if (repr == NULL)
        return -1;
    PyObject *cut = PyUnicode_Substring(repr, 0, 60);
    Py_DECREF(repr);
    if (cut == NULL)
        return -1;
    PyErr_Format(PyExc_ValueError,
                 "key %U cannot go into a memc gateway URL: keys may hold only letters, "
                 "digits and -._~:@!$'()*,;/ (the gateway does not URL-decode)",
                 cut);
    Py_DECREF(cut);
    return -1;
}

/* The command word of each op's query (http1.py's _STORES and the others). */
static const Words commands[OP_GETS + 1] = {
    [OP_GET] = WORDS("get&key="),         [OP_SET] = WORDS("set&key="),
    [OP_DELETE] = WORDS("delete&key="),   [OP_INCR] = WORDS("incr&key="),
    [OP_DECR] = WORDS("decr&key="),       [OP_ADD] = WORDS("add&key="),
    [OP_REPLACE] = WORDS("replace&key="), [OP_APPEND] = WORDS("append&key="),
    [OP_PREPEND] = WORDS("prepend&key="),
};

/* What a request writes besides its key, its value and the Encoding's two parts, at
 * most: the command, "&val=", "&exptime=<ttl>&flags=<flags>". */
#define HTTP_FRAME_BYTES 96

static int
encode_http(const Encoding *e, int op, const Request *r, Tags *t, Out *o)
{
    tables_ready();
    if (r->key_len == 0)
        return bad_key(r->key, 0);
    for (Py_ssize_t i = 0; i < r->key_len; i++)
        if (!key_safe[(unsigned char)r->key[i]])
            return bad_key(r->key, r->key_len);
    /* (request_reserve kept room for the key, the value and FRAME_BYTES; the target and
     * tail are the connection's, of any length) */
    if (out_reserve(o, e->http_target_len + e->http_tail_len + HTTP_FRAME_BYTES) < 0)
        return -1;
    put(o, e->http_target, e->http_target_len);
    put_words(o, commands[op]);
    put(o, r->key, r->key_len);
    if (op_stores(op)) {
        PUT_LITERAL(o, "&val=");
        unsigned char *v = (unsigned char *)o->p + o->len;
        for (Py_ssize_t i = 0; i < r->value_len; i++)
            v[i] = value_table[(unsigned char)r->value[i]];
        o->len += r->value_len;
        if (e->ttl)
            PUT_FIELD(o, "&exptime=", e->ttl);
        if (e->flags)
            PUT_FIELD(o, "&flags=", e->flags);
    }
    else if (op == OP_INCR || op == OP_DECR) {
        PUT_LITERAL(o, "&val=1");
    }
    put(o, e->http_tail, e->http_tail_len);
    return 0;
}

/* A connection's Encoding must carry its request's target and tail. */
static int
check_http(const Encoding *e)
{
    if (e->http_target_len == 0 || e->http_tail_len == 0) {
        PyErr_SetString(PyExc_ValueError,
                        "an HTTP stream needs its requests' target and tail (target=, tail=)");
        return -1;
    }
    return 0;
}

/* No multi-get, gets or cas: a gateway has no form for them (http1.py). */
#define HTTP_OPS                                                                          \
    (OP_BIT(OP_GET) | OP_BIT(OP_SET) | OP_BIT(OP_DELETE) | OP_BIT(OP_INCR) | OP_BIT(OP_DECR) | \
     OP_BIT(OP_ADD) | OP_BIT(OP_REPLACE) | OP_BIT(OP_APPEND) | OP_BIT(OP_PREPEND))
const Wire http_wire = {scan_http, encode_http, NULL, check_http, HTTP_OPS};
