/* memcached text protocol for the pump (memcached doc/protocol.txt): the reply scanner and
 * the request encoder, mirroring protocols/memcache_text.py (the reference).
 *
 * Requests: "get k", "set k <flags> <ttl> <bytes>" + data block, "delete k", "incr k 1",
 * "decr k 1", "get k1 k2 ..."; and a replay's "gets k", "add"/"replace"/"append"/"prepend"
 * as set, "cas k <flags> <ttl> <bytes> 0" + data block. A gets reply is a get's (its
 * VALUE line's cas field is allowed), the storage commands' are set's. Replies are checked against the grammar of what the op may
 * get back; the keys VALUE lines echo are not (the codec checks them).
 */
#include "_pump.h"

/* -- replies ------------------------------------------------------------------------- */

/* One status line at p: its length without CRLF in *len, or NEED / BAD (too long). */
static Py_ssize_t
status_line(const char *p, Py_ssize_t n, long long max, Py_ssize_t *len, Scan *s)
{
    Py_ssize_t eol = find_crlf(p, n);
    if (eol < 0) {
        if (n > max)
            return scan_fail(s, "reply line longer than the reply bound");
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
 * *block_end (and where <data> starts in *data_at), NEED, or BAD. Checks the bound on what
 * the reply will take (``before`` bytes of it precede p, ``tail`` follow the block). */
static Py_ssize_t
value_block(const char *p, Py_ssize_t n, long long max, Py_ssize_t before, Py_ssize_t tail,
            Py_ssize_t *block_end, Py_ssize_t *data_at, Scan *s)
{
    Py_ssize_t eol = find_crlf(p, n);
    if (eol < 0) {
        if (before + n > max)
            return scan_fail(s, "get reply larger than the reply bound");
        return NEED;
    }
    long long size = value_size(p + 6, eol - 6);
    if (size < 0)
        return scan_fail(s, "bad VALUE header");
    long long end = eol + 2 + size;
    if (before + end + tail > max)
        return scan_fail(s, "get reply larger than the reply bound");
    *block_end = (Py_ssize_t)end;
    *data_at = eol + 2;
    return 1;
}

static Py_ssize_t
text_status(const char *p, Py_ssize_t n, long long max, int family, Scan *s)
{
    static const char *const what[F_COUNT] = {
        "?", "get", "get", "a storage command", "delete", "incr/decr", "?"};
    Py_ssize_t len = 0;
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
                return scan_fail(s, "incr/decr reply longer than the reply bound");
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
            return scan_fail(s, "error line longer than the reply bound");
        s->code = K_ERROR;
        return r;
    }
    return scan_failf(s, p, len, "unexpected reply to %s: ", what[family]);
}

static Py_ssize_t
text_get(const char *p, Py_ssize_t n, long long max, Scan *s)
{
    if (starts(p, n, "VALUE ")) {
        Py_ssize_t end, data;
        Py_ssize_t r = value_block(p, n, max, 0, 7, &end, &data, s);
        if (r <= 0)
            return r;
        if (n < end + 7) {
            /* Fail as soon as what follows the block cannot become CRLF END CRLF. */
            if (n > end && memcmp(p + end, "\r\nEND\r\n", (size_t)(n - end)) != 0)
                return scan_fail(s, "get: data block not followed by CRLF END CRLF");
            return NEED;
        }
        if (memcmp(p + end, "\r\nEND\r\n", 7) != 0)
            return scan_fail(s, "get: data block not followed by CRLF END CRLF");
        s->code = K_HIT | 1 << KEYS_SHIFT;
        s->value_at = data;
        s->value_len = end - data;
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
            Py_ssize_t end, data;
            Py_ssize_t r = value_block(q, left, max, pos, 2 + 5, &end, &data, s);
            if (r <= 0)
                return r;
            if (left < end + 2)
                return NEED;
            if (memcmp(q + end, "\r\n", 2) != 0)
                return scan_fail(s, "get: data block not followed by CRLF");
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

/* -- an arbitrary command's reply (--command) ------------------------------------------ */

/* What follows the first line of a listing: lines that each start with one of ``items``
 * (VALUE ones with their data block), until a line that does not: END (ok), an error line
 * (memcached's part way: out of memory), or anything else (a grammar error). As the
 * codec's _command_lines; ``pos``: the first item's line. */
static Py_ssize_t
command_lines(const char *p, Py_ssize_t n, long long max, int blocks, Scan *s)
{
    Py_ssize_t pos = 0;
    for (;;) {
        Py_ssize_t eol = find_crlf(p + pos, n - pos);
        if (eol < 0)
            return n > max ? scan_fail(s, "reply larger than the reply bound") : NEED;
        const char *line = p + pos;
        int item = blocks ? starts(line, eol, "VALUE ")
                          : starts(line, eol, "STAT ") || starts(line, eol, "ITEM ");
        if (!item) {
            if (is_word(line, eol, "END"))
                s->code = K_OK;
            else if (is_error_line(line, eol))
                s->code = K_ERROR;
            else
                return scan_failf(s, line, eol, "unexpected line in a command's reply: ");
            return pos + eol + 2;
        }
        Py_ssize_t end = pos + eol + 2;
        if (blocks) {
            long long size = value_size(line + 6, eol - 6);
            if (size < 0)
                return scan_failf(s, line, eol, "bad VALUE header: ");
            if (size + 2 > max - end) /* (end + size + 2 > max, without overflow) */
                return scan_fail(s, "reply larger than the reply bound");
            end += (Py_ssize_t)size + 2;
        }
        if (end > max)
            return scan_fail(s, "reply larger than the reply bound");
        if (n < end)
            return NEED;
        if (blocks && memcmp(p + end - 2, "\r\n", 2) != 0)
            return scan_fail(s, "VALUE data block not followed by CRLF");
        pos = end;
    }
}

/* Any command's reply, framed by its first line as the codec's _parse_command frames it
 * (protocol.txt "Commands"): VALUE blocks then END (get, gets, gat, gats); "VA <size>
 * ..." and one data block (meta get or arithmetic with v); STAT or ITEM lines then END
 * (stats, stats cachedump); else one line: an error line (K_ERROR) or any other (K_OK:
 * STORED, TOUCHED, DELETED, HD, EN, a number, VERSION ...). */
static Py_ssize_t
text_command(const char *p, Py_ssize_t n, long long max, Scan *s)
{
    Py_ssize_t eol = find_crlf(p, n);
    if (eol < 0)
        return n > max ? scan_fail(s, "reply line longer than the reply bound") : NEED;
    if (starts(p, eol, "VALUE "))
        return command_lines(p, n, max, 1, s);
    if (starts(p, eol, "STAT ") || starts(p, eol, "ITEM "))
        return command_lines(p, n, max, 0, s);
    if (starts(p, eol, "VA ")) {
        const char *size = p + 3, *space = memchr(size, ' ', (size_t)(eol - 3));
        Py_ssize_t digits = space != NULL ? space - size : eol - 3;
        if (!all_digits(size, digits) || digits > MAX_SIZE_DIGITS)
            return scan_failf(s, p, eol, "bad VA line: ");
        long long count = 0;
        for (Py_ssize_t i = 0; i < digits; i++)
            count = count * 10 + (size[i] - '0');
        if (count > max - (eol + 4)) /* (eol + 2 + count + 2 > max) */
            return scan_fail(s, "reply larger than the reply bound");
        Py_ssize_t end = eol + 2 + (Py_ssize_t)count;
        if (n < end + 2)
            return NEED;
        if (memcmp(p + end, "\r\n", 2) != 0)
            return scan_fail(s, "VA data block not followed by CRLF");
        s->code = K_OK;
        return end + 2;
    }
    if (eol + 2 > max)
        return scan_fail(s, "reply line longer than the reply bound");
    s->code = is_error_line(p, eol) ? K_ERROR : K_OK;
    return eol + 2;
}

static Py_ssize_t
scan_text(const char *p, Py_ssize_t n, const Head *head, long long max, Scan *s)
{
    if (head == NULL)
        return scan_no_request(s);
    switch (head->family) {
    case F_GET:
        return text_get(p, n, max, s);
    case F_MGET:
        return text_mget(p, n, max, s);
    case F_COMMAND:
        return text_command(p, n, max, s);
    default:
        return text_status(p, n, max, head->family, s);
    }
}

/* -- requests ------------------------------------------------------------------------ */

/* "<verb> k <flags> <ttl> <bytes>[ <cas unique>]\r\n" + data block. */
static void
put_text_store(const Encoding *e, int op, const Request *r, Tags *t, Out *o);

/* A multi-get: "get k1 k2 ...\r\n". */
static int
put_text_mget(MultiGet *m, Tags *t, Out *o)
{
    PUT_LITERAL(o, "get");
    while (mget_next(m)) {
        PUT_LITERAL(o, " ");
        put(o, m->key, m->key_len);
    }
    PUT_LITERAL(o, "\r\n");
    return 0;
}

static const Encoder text_encoder = {
    .words = {
        [OP_GET] = {WORDS("get "), WORDS("\r\n")},
        [OP_GETS] = {WORDS("gets "), WORDS("\r\n")},
        [OP_DELETE] = {WORDS("delete "), WORDS("\r\n")},
        [OP_INCR] = {WORDS("incr "), WORDS(" 1\r\n")}, /* one step */
        [OP_DECR] = {WORDS("decr "), WORDS(" 1\r\n")},
        [OP_SET] = {WORDS("set ")}, [OP_ADD] = {WORDS("add ")},
        [OP_REPLACE] = {WORDS("replace ")}, [OP_APPEND] = {WORDS("append ")},
        [OP_PREPEND] = {WORDS("prepend ")}, [OP_CAS] = {WORDS("cas ")},
    },
    .mget = put_text_mget,
    .mget_per_key = 1,
    .store = put_text_store,
};

static void
put_text_store(const Encoding *e, int op, const Request *r, Tags *t, Out *o)
{
    put_words(o, text_encoder.words[op][0]);
    put(o, r->key, r->key_len);
    PUT_FIELD(o, " ", e->flags);
    PUT_FIELD(o, " ", e->ttl);
    PUT_FIELD(o, " ", r->value_len);
    if (op == OP_CAS) /* a replay's cas carries no token: unique 0 (workload/trace_ops.py) */
        PUT_LITERAL(o, " 0");
    PUT_LITERAL(o, "\r\n");
    put_data_block(o, r);
}

DEFINE_ENCODE(encode_text, text_encoder)

/* No opaques, no settings to check; a command (its request rendered whole: encode_request
 * writes it). */
const Wire text_wire = {
    scan_text, encode_text, NULL, NULL,
    MEMCACHED_OPS | OP_BIT(OP_COMMAND)};
