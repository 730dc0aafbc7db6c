/* The floor under a client's CPU per op over loopback: a client that does nothing but the
 * system calls. Not part of kvbench; a measuring stick for docs/benchmarks.md.
 *
 * N connections to a memcached, each with one "get <key>\r\n" in flight (pipeline 1,
 * closed loop); a reply is complete when the bytes read so far end in "END\r\n" (store
 * the key first, so each reply is a hit). No parsing, no timing per request, no
 * histogram: what it spends per op is the kernel's TCP work and the system calls.
 *
 *   epoll  level-triggered epoll; per ready socket one recv, then one send of the next
 *          request (the calls kvbench's compiled loop makes, engine/_pump_loop.c)
 *   uring  io_uring (built with -DKVBENCH_URING -luring, liburing >= 2.3): multishot
 *          receives into a provided-buffer ring, sends queued as SQEs and submitted
 *          together with the wait, registered files, SINGLE_ISSUER | DEFER_TASKRUN
 *
 * It prints ops/s and its own CPU (user + system, getrusage) per op. Pin it and the
 * server to their cores as bench/peers.py does:
 *
 *   cc -O2 -o /tmp/kernel_floor bench/kernel_floor.c [-DKVBENCH_URING -luring]
 *   taskset -c 0 memcached -p 22122 -t 1 -d -u nobody
 *   python3 -c "import socket; socket.create_connection(('127.0.0.1', 22122)).sendall(
 *       b'set k 0 0 100\r\n' + b'0' * 100 + b'\r\n')"
 *   taskset -c 1 /tmp/kernel_floor 22122 50 epoll 4 k
 *
 * Up to 16,384 connections (memcached -c 20000 and an open-file limit to match for
 * 10,000: docs/benchmarks.md compares 50 with 10,000).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifdef KVBENCH_URING
#include <liburing.h>
#endif

#define MAX_CONNECTIONS 16384

static int fds[MAX_CONNECTIONS], connections;
static char request[300];
static int request_len;
static long long ops;

static void
die(const char *what)
{
    perror(what);
    exit(1);
}

static double
seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double
cpu_s(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
           (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
}

static void
connect_all(int port)
{
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < connections; i++) {
        int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) < 0)
            die("connect");
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fds[i] = fd;
    }
}

/* A read of n bytes at p: 1 when it ends a reply (one reply in flight per connection). */
static int
ends_reply(const char *p, long n)
{
    return n >= 5 && memcmp(p + n - 5, "END\r\n", 5) == 0;
}

static void
run_epoll(double until)
{
    static char buffer[65536];
    struct epoll_event events[256];
    int epfd = epoll_create1(0);
    for (int i = 0; i < connections; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, fds[i], &ev) < 0)
            die("epoll_ctl");
        if (send(fds[i], request, (size_t)request_len, MSG_NOSIGNAL) != request_len)
            die("send");
    }
    while (seconds(CLOCK_MONOTONIC) < until) {
        int n = (int)syscall(SYS_epoll_pwait, epfd, events, 256, 100, NULL, 8);
        for (int k = 0; k < n; k++) {
            int fd = fds[events[k].data.u32];
            long got = syscall(SYS_recvfrom, fd, buffer, sizeof buffer, 0, NULL, NULL);
            if (got <= 0)
                die("recv");
            if (ends_reply(buffer, got)) {
                ops++;
                syscall(SYS_sendto, fd, request, request_len, MSG_NOSIGNAL | MSG_DONTWAIT, NULL, 0);
            }
        }
    }
}

#ifdef KVBENCH_URING
#define GROUP 1
#define BUFFERS 1024
#define BUFFER_BYTES 4096
#define RECV_TAG (1ULL << 32)

static void
queue_recv(struct io_uring *ring, int i)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    io_uring_prep_recv_multishot(sqe, i, NULL, 0, 0);
    sqe->flags |= IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT;
    sqe->buf_group = GROUP;
    sqe->user_data = RECV_TAG | (unsigned)i;
}

static void
queue_send(struct io_uring *ring, int i)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    io_uring_prep_send(sqe, i, request, (size_t)request_len, MSG_NOSIGNAL);
    sqe->flags |= IOSQE_FIXED_FILE | IOSQE_CQE_SKIP_SUCCESS;
    sqe->user_data = (unsigned)i;
}

static void
run_uring(double until)
{
    struct io_uring ring;
    struct io_uring_params params = {
        .flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL};
    if (io_uring_queue_init_params(4096, &ring, &params) < 0 ||
        io_uring_register_files(&ring, fds, (unsigned)connections) < 0)
        die("io_uring setup");
    struct io_uring_buf_ring *buffers;
    if (posix_memalign((void **)&buffers, 4096, BUFFERS * sizeof(struct io_uring_buf)))
        die("posix_memalign");
    struct io_uring_buf_reg reg = {
        .ring_addr = (unsigned long)buffers, .ring_entries = BUFFERS, .bgid = GROUP};
    if (io_uring_register_buf_ring(&ring, &reg, 0) < 0)
        die("io_uring_register_buf_ring");
    io_uring_buf_ring_init(buffers);
    char *memory = malloc((size_t)BUFFERS * BUFFER_BYTES);
    if (memory == NULL)
        die("malloc");
    for (int b = 0; b < BUFFERS; b++)
        io_uring_buf_ring_add(buffers, memory + (size_t)b * BUFFER_BYTES, BUFFER_BYTES,
                              (unsigned short)b, io_uring_buf_ring_mask(BUFFERS), b);
    io_uring_buf_ring_advance(buffers, BUFFERS);
    for (int i = 0; i < connections; i++) {
        queue_recv(&ring, i);
        queue_send(&ring, i);
    }
    while (seconds(CLOCK_MONOTONIC) < until) {
        io_uring_submit_and_wait(&ring, 1);
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        int returned = 0;
        io_uring_for_each_cqe(&ring, head, cqe)
        {
            seen++;
            int i = (int)(cqe->user_data & 0xFFFFFFFFu);
            if (!(cqe->user_data & RECV_TAG)) { /* only a failed send has a completion */
                errno = -cqe->res;
                die("send");
            }
            if (cqe->res <= 0) {
                errno = cqe->res ? -cqe->res : ECONNRESET;
                die("recv");
            }
            int b = (int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
            char *p = memory + (size_t)b * BUFFER_BYTES;
            if (ends_reply(p, cqe->res)) {
                ops++;
                queue_send(&ring, i);
            }
            io_uring_buf_ring_add(buffers, p, BUFFER_BYTES, (unsigned short)b,
                                  io_uring_buf_ring_mask(BUFFERS), returned++);
            if (!(cqe->flags & IORING_CQE_F_MORE)) /* the multishot receive ended: again */
                queue_recv(&ring, i);
        }
        io_uring_buf_ring_advance(buffers, returned);
        io_uring_cq_advance(&ring, seen);
    }
}
#endif

int
main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: %s PORT CONNECTIONS epoll|uring SECONDS KEY\n", argv[0]);
        return 2;
    }
    connections = atoi(argv[2]);
    if (connections < 1 || connections > MAX_CONNECTIONS) {
        fprintf(stderr, "connections: 1 to %d\n", MAX_CONNECTIONS);
        return 2;
    }
    request_len = snprintf(request, sizeof request, "get %.250s\r\n", argv[5]);
    connect_all(atoi(argv[1]));
    double start = seconds(CLOCK_MONOTONIC), cpu = cpu_s(), until = start + atof(argv[4]);
    if (strcmp(argv[3], "epoll") == 0)
        run_epoll(until);
#ifdef KVBENCH_URING
    else if (strcmp(argv[3], "uring") == 0)
        run_uring(until);
#endif
    else {
        fprintf(stderr, "mode %s: epoll, or uring when built with -DKVBENCH_URING\n", argv[3]);
        return 2;
    }
    double wall = seconds(CLOCK_MONOTONIC) - start;
    cpu = cpu_s() - cpu;
    printf("%-5s connections %d  ops/s %.0f  cpu us/op %.3f  cores %.2f\n", argv[3],
           connections, (double)ops / wall, 1e6 * cpu / (double)(ops ? ops : 1), cpu / wall);
    return 0;
}
