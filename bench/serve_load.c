/* serve_load.c — load on ./serve: C connections (kept alive), each sending one sentence per
 * POST /api/translate for S seconds, the sentences taken in turn from a file.
 *   serve_load --port P --input FILE [--connections 64] [--seconds 30] [--pid SERVER_PID]
 * prints one JSON line: requests, errors (any answer but 200, or none), requests/s,
 * p50/p99/max latency, and with --pid the server's resident memory idle, a third into the run
 * and at its end (the last two should agree: memory flat under load). */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct Shared {
    int port, seconds;
    char **lines;
    int n_lines;
    double t_end;
} Shared;

typedef struct Worker {
    const Shared *sh;
    int id;
    long requests, errors;
    double *lat; /* ms, one per request */
    long cap;
} Worker;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

/* One request on a kept-alive connection: the status, or -1 when the connection failed. */
static int request(int fd, const char *sentence, char *buf, size_t cap) {
    char body[2048], msg[2400];
    int nb = snprintf(body, sizeof body, "{\"text\": \"%s\"}", sentence); /* the input file's lines need no escaping */
    /* headers and body in one write: two small writes meet Nagle's algorithm and the delayed
     * ACK (40 ms a request on Linux) */
    int n = snprintf(msg, sizeof msg,
                     "POST /api/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %d\r\n\r\n%s",
                     nb, body);
    if (n >= (int)sizeof msg || write_all(fd, msg, (size_t)n)) return -1;
    size_t len = 0;
    char *end = NULL;
    while (!(end = strstr(buf, "\r\n\r\n"))) { /* the headers */
        ssize_t k = read(fd, buf + len, cap - len - 1);
        if (k <= 0) return -1;
        len += (size_t)k;
        buf[len] = '\0';
        if (len + 1 >= cap) return -1;
    }
    int status = strncmp(buf, "HTTP/1.1 ", 9) == 0 ? atoi(buf + 9) : -1;
    const char *cl = strstr(buf, "Content-Length: ");
    size_t want = cl ? (size_t)strtoul(cl + 16, NULL, 10) : 0, have = len - (size_t)(end + 4 - buf);
    while (have < want) { /* the body, read and dropped */
        ssize_t k = read(fd, buf, cap - 1);
        if (k <= 0) return -1;
        have += (size_t)k;
    }
    buf[0] = '\0';
    return status;
}

static void *run(void *arg) {
    Worker *w = arg;
    const Shared *sh = w->sh;
    char *buf = malloc(1 << 16);
    buf[0] = '\0';
    int fd = connect_to(sh->port), next = w->id;
    while (now() < sh->t_end) {
        if (fd < 0 && (fd = connect_to(sh->port)) < 0) {
            w->errors++;
            continue;
        }
        double t0 = now();
        int st = request(fd, sh->lines[next++ % sh->n_lines], buf, 1 << 16);
        double ms = 1e3 * (now() - t0);
        if (st < 0) { /* a dropped connection: counted, and opened again */
            close(fd);
            fd = -1;
            buf[0] = '\0';
        }
        if (st != 200) w->errors++;
        if (w->requests == w->cap) w->lat = realloc(w->lat, (size_t)(w->cap = 2 * w->cap + 1024) * sizeof *w->lat);
        w->lat[w->requests++] = ms;
    }
    if (fd >= 0) close(fd);
    free(buf);
    return NULL;
}

static double rss_mb(int pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = atof(line + 6);
    if (f) fclose(f);
    return kb / 1024.0;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    Shared sh = {.port = 0, .seconds = 30};
    int conns = 64, pid = 0;
    const char *input = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port")) sh.port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--input")) input = argv[i + 1];
        else if (!strcmp(argv[i], "--connections")) conns = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) sh.seconds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--pid")) pid = atoi(argv[i + 1]);
    }
    FILE *f = input ? fopen(input, "r") : NULL;
    if (!f || sh.port <= 0 || conns < 1 || conns > 1024 || sh.seconds < 1) {
        fprintf(stderr, "usage: serve_load --port P --input FILE [--connections 64] [--seconds 30] [--pid SERVER_PID]\n");
        return 2;
    }
    char line[1024];
    int cap = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || strpbrk(line, "\"\\")) continue;
        if (sh.n_lines == cap) sh.lines = realloc(sh.lines, (size_t)(cap = 2 * cap + 64) * sizeof *sh.lines);
        sh.lines[sh.n_lines++] = strdup(line);
    }
    fclose(f);
    if (!sh.n_lines) {
        fprintf(stderr, "serve_load: %s has no usable line\n", input);
        return 2;
    }
    double rss0 = pid ? rss_mb(pid) : -1;
    Worker *w = calloc((size_t)conns, sizeof *w);
    pthread_t *th = calloc((size_t)conns, sizeof *th);
    double t0 = now();
    sh.t_end = t0 + sh.seconds;
    for (int i = 0; i < conns; i++) {
        w[i] = (Worker){.sh = &sh, .id = i * 7};
        pthread_create(&th[i], NULL, run, &w[i]);
    }
    double rss_third = -1; /* after the start-up (threads, buffers): from here on it should stay flat */
    if (pid) {
        struct timespec ts = {sh.seconds / 3, (long)((sh.seconds % 3) * 333333333L)};
        nanosleep(&ts, NULL);
        rss_third = rss_mb(pid);
    }
    long requests = 0, errors = 0;
    for (int i = 0; i < conns; i++) {
        pthread_join(th[i], NULL);
        requests += w[i].requests;
        errors += w[i].errors;
    }
    double dt = now() - t0;
    double *all = malloc((size_t)(requests ? requests : 1) * sizeof *all);
    long k = 0;
    for (int i = 0; i < conns; i++) {
        memcpy(all + k, w[i].lat, (size_t)w[i].requests * sizeof *all);
        k += w[i].requests;
        free(w[i].lat);
    }
    qsort(all, (size_t)requests, sizeof *all, cmp);
    double p50 = requests ? all[requests / 2] : 0, p99 = requests ? all[(long)(0.99 * (double)(requests - 1))] : 0,
           mx = requests ? all[requests - 1] : 0;
    printf("{\"event\":\"serve_load\",\"connections\":%d,\"seconds\":%.1f,\"requests\":%ld,\"errors\":%ld,"
           "\"requests_per_s\":%.1f,\"p50_ms\":%.2f,\"p99_ms\":%.2f,\"max_ms\":%.2f",
           conns, dt, requests, errors, (double)requests / dt, p50, p99, mx);
    if (pid)
        printf(",\"server_rss_idle_mb\":%.1f,\"server_rss_at_third_mb\":%.1f,\"server_rss_end_mb\":%.1f", rss0, rss_third,
               rss_mb(pid));
    printf("}\n");
    free(all);
    free(w);
    free(th);
    for (int i = 0; i < sh.n_lines; i++) free(sh.lines[i]);
    free(sh.lines);
    return errors ? 1 : 0;
}
