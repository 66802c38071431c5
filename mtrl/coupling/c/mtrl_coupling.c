/* mtrl coupling protocol, version 1: the C client (see mtrl_coupling.h, docs/COUPLING.md). */
#include "mtrl_coupling.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "zmq.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the mtrl coupling C client assumes a little-endian machine"
#endif

#define HEADER_BYTES 24
#define MAX_FRAMES 4
#define DEFAULT_MAX_MESSAGE_BYTES (64LL << 20) /* per frame; MTRL_MAX_MESSAGE_BYTES overrides */

struct mtrl_sim {
    void *ctx;
    void *sock;
    void *monitor;
    zmq_msg_t frames[MAX_FRAMES];
    int nframes;
    uint32_t seq;     /* seq of the request awaiting a reply */
    int pending;      /* op awaiting a reply, 0 if none */
    int num_envs;     /* from the last HELLO; 0 before */
    size_t obs_bytes; /* per copy, from mtrl_sim_reply_hello */
    size_t action_bytes;
    int bound;    /* bind = 1: attach mode */
    int had_peer; /* a request arrived once (bound sockets: a disconnect can then be it) */
    char announced[4096]; /* the announcement file written by mtrl_sim_announce, or "" */
    char error[512];
};

static void set_error(mtrl_sim *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error, sizeof s->error, fmt, ap);
    va_end(ap);
}

static void pack_header(unsigned char *h, int op, uint32_t seq, uint32_t count, int64_t arg) {
    uint16_t version = MTRL_PROTOCOL_VERSION, op16 = (uint16_t)op;
    memcpy(h, "MTRL", 4);
    memcpy(h + 4, &version, 2);
    memcpy(h + 6, &op16, 2);
    memcpy(h + 8, &seq, 4);
    memcpy(h + 12, &count, 4);
    memcpy(h + 16, &arg, 8);
}

static void drop_frames(mtrl_sim *s) {
    for (int i = 0; i < s->nframes; i++) zmq_msg_close(&s->frames[i]);
    s->nframes = 0;
}

/* Send a header and parts (ptr, len pairs). Returns MTRL_OK or MTRL_E_ZMQ. */
static int send_parts(mtrl_sim *s, int op, uint32_t count, int nparts, const void **ptr,
                      const size_t *len) {
    unsigned char h[HEADER_BYTES];
    pack_header(h, op, s->seq, count, 0);
    if (zmq_send(s->sock, h, HEADER_BYTES, nparts ? ZMQ_SNDMORE : 0) < 0) goto fail;
    for (int i = 0; i < nparts; i++) {
        if (zmq_send(s->sock, ptr[i], len[i], i + 1 < nparts ? ZMQ_SNDMORE : 0) < 0) goto fail;
    }
    s->pending = 0;
    return MTRL_OK;
fail:
    set_error(s, "zmq_send: %s", zmq_strerror(zmq_errno()));
    return MTRL_E_ZMQ;
}

static int send_error_text(mtrl_sim *s, const char *text) {
    const void *p[1] = {text};
    size_t n[1] = {strlen(text)};
    return send_parts(s, MTRL_ERROR, 0, 1, p, n);
}

/* Whether a tcp:// address names this machine only (127.0.0.0/8, ::1, localhost); other
 * transports (ipc, inproc) count as local. */
static int is_loopback(const char *address) {
    const char *rest, *semi, *colon;
    char host[256], *h = host, *end;
    struct in_addr a4;
    struct in6_addr a6;
    size_t len;
    if (strncmp(address, "tcp://", 6) != 0) return 1;
    rest = address + 6;
    semi = strrchr(rest, ';'); /* "source;destination" */
    if (semi) rest = semi + 1;
    colon = strrchr(rest, ':');
    len = colon ? (size_t)(colon - rest) : strlen(rest);
    if (len >= sizeof host) return 0;
    memcpy(host, rest, len);
    host[len] = 0;
    if (*h == '[') {
        h++;
        end = strchr(h, ']');
        if (end) *end = 0;
    }
    if (strcmp(h, "localhost") == 0) return 1;
    if (inet_pton(AF_INET, h, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, h, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return 0;
}

/* Apply the transport rules of docs/COUPLING.md (section 2) from the environment: the frame
 * bound (MTRL_MAX_MESSAGE_BYTES), CURVE server with MTRL_CURVE_SECRET_KEY, and no plain tcp://
 * on a non-loopback address unless MTRL_COUPLING_INSECURE=1. Returns 0, or -1 with a message
 * on stderr. */
static int secure_socket(void *sock, const char *address) {
    const char *secret = getenv("MTRL_CURVE_SECRET_KEY");
    const char *insecure = getenv("MTRL_COUPLING_INSECURE");
    const char *max_env = getenv("MTRL_MAX_MESSAGE_BYTES");
    int64_t max_bytes = max_env && *max_env ? strtoll(max_env, NULL, 10) : 0;
    int one = 1, major, minor, patch;
    if (max_bytes <= 0) max_bytes = DEFAULT_MAX_MESSAGE_BYTES;
    if (zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max_bytes, sizeof max_bytes) < 0) return -1;
    if (secret && *secret) {
        if (!zmq_has("curve")) {
            zmq_version(&major, &minor, &patch);
            fprintf(stderr,
                    "mtrl_sim_open(%s): MTRL_CURVE_SECRET_KEY is set, but the libzmq this code "
                    "links (%d.%d.%d) was built without CURVE (libsodium): link the libzmq "
                    "bundled with pyzmq (mtrl.coupling.cbuild does) or one built with CURVE\n",
                    address, major, minor, patch);
            return -1;
        }
        if (strlen(secret) != 40 ||
            zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) < 0 ||
            zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, secret, 41) < 0) {
            fprintf(stderr,
                    "mtrl_sim_open(%s): MTRL_CURVE_SECRET_KEY must be a CURVE secret key "
                    "(40 characters of Z85 text)\n",
                    address);
            return -1;
        }
        return 0;
    }
    if (!is_loopback(address) && !(insecure && strcmp(insecure, "1") == 0)) {
        fprintf(stderr,
                "mtrl_sim_open(%s): plain tcp:// on an address that is not loopback would let "
                "anyone who reaches it read and drive the simulation: set "
                "MTRL_CURVE_SECRET_KEY (python -m mtrl.coupling.curve makes a key pair; mtrl "
                "takes the public key as server_key), or MTRL_COUPLING_INSECURE=1 on a network "
                "you trust\n",
                address);
        return -1;
    }
    return 0;
}

mtrl_sim *mtrl_sim_open(const char *address, int bind, double heartbeat_s) {
    mtrl_sim *s = calloc(1, sizeof *s);
    char monitor_addr[64];
    int ivl = (int)((heartbeat_s > 0 ? heartbeat_s : 1.0) * 1000.0), timeout = 3 * ivl;
    int linger = 1000;
    if (!s) return NULL;
    s->ctx = zmq_ctx_new();
    s->sock = s->ctx ? zmq_socket(s->ctx, ZMQ_DEALER) : NULL;
    if (!s->sock) goto fail;
    zmq_setsockopt(s->sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s->sock, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(s->sock, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof timeout);
    zmq_setsockopt(s->sock, ZMQ_HEARTBEAT_TTL, &timeout, sizeof timeout);
    if (secure_socket(s->sock, address) < 0) {
        mtrl_sim_close(s);
        return NULL;
    }
    snprintf(monitor_addr, sizeof monitor_addr, "inproc://mtrl-monitor-%p", (void *)s);
    s->bound = bind;
    if (zmq_socket_monitor(s->sock, monitor_addr,
                           ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) < 0)
        goto fail;
    s->monitor = zmq_socket(s->ctx, ZMQ_PAIR);
    if (!s->monitor || zmq_connect(s->monitor, monitor_addr) < 0) goto fail;
    if ((bind ? zmq_bind(s->sock, address) : zmq_connect(s->sock, address)) < 0) goto fail;
    snprintf(s->error, sizeof s->error, "no error");
    return s;
fail:
    fprintf(stderr, "mtrl_sim_open(%s): %s\n", address, zmq_strerror(zmq_errno()));
    mtrl_sim_close(s);
    return NULL;
}

/* Receive all frames of one message into s->frames (extra frames are dropped). */
static int recv_message(mtrl_sim *s) {
    int more = 1;
    size_t more_len = sizeof more;
    drop_frames(s);
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s->sock, 0) < 0) {
            zmq_msg_close(&m);
            set_error(s, "zmq_msg_recv: %s", zmq_strerror(zmq_errno()));
            return MTRL_E_ZMQ;
        }
        zmq_getsockopt(s->sock, ZMQ_RCVMORE, &more, &more_len);
        if (s->nframes < MAX_FRAMES) {
            s->frames[s->nframes++] = m;
        } else {
            zmq_msg_close(&m); /* a 5th frame or more: the request is rejected below */
        }
    }
    return MTRL_OK;
}

/* Whether a peer that completed the handshake is attached: a DEALER can send (POLLOUT)
 * exactly then. libzmq gets 200 ms to detach a lost one. */
static int peer_attached(mtrl_sim *s) {
    struct timespec pause = {0, 5000000};
    for (int i = 0; i < 40; i++) {
        int events = 0;
        size_t len = sizeof events;
        if (zmq_getsockopt(s->sock, ZMQ_EVENTS, &events, &len) < 0) return 0;
        if (!(events & ZMQ_POLLOUT)) return 0;
        nanosleep(&pause, NULL);
    }
    return 1;
}

/* Drain the monitor; returns 1 if the trainer is gone. A bound socket ignores connections
 * that never completed the handshake (anyone may knock on a tcp port) and counts a disconnect
 * only when its trainer is no longer attached; a connecting socket has one connection, whose
 * disconnect or failed handshake ends it (docs/COUPLING.md, section 2). */
static int peer_gone(mtrl_sim *s) {
    int lost = 0, failed = 0, first = 1; /* an event is 2 frames: (event, value), endpoint */
    for (;;) {
        zmq_msg_t m;
        int was_first = first;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        first = !zmq_msg_more(&m);
        if (was_first && zmq_msg_size(&m) >= 2) {
            uint16_t event;
            memcpy(&event, zmq_msg_data(&m), 2);
            if (event == ZMQ_EVENT_DISCONNECTED) lost = 1;
            if (event & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                         ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH))
                failed = 1;
        }
        zmq_msg_close(&m);
    }
    if (s->bound) return lost && s->had_peer && !peer_attached(s);
    return lost || failed;
}

/* Parse the request in s->frames. Returns its op, or 0 when it was malformed (answered). */
static int parse_request(mtrl_sim *s, mtrl_request *rq) {
    const unsigned char *h;
    uint16_t version, op;
    uint32_t count;
    int64_t arg;
    if (s->nframes < 1 || zmq_msg_size(&s->frames[0]) != HEADER_BYTES) {
        s->seq = 0;
        send_error_text(s, "malformed request: the header frame must have 24 bytes");
        return 0;
    }
    h = zmq_msg_data(&s->frames[0]);
    memcpy(&version, h + 4, 2);
    memcpy(&op, h + 6, 2);
    memcpy(&s->seq, h + 8, 4);
    memcpy(&count, h + 12, 4);
    memcpy(&arg, h + 16, 8);
    if (memcmp(h, "MTRL", 4) != 0 || version != MTRL_PROTOCOL_VERSION) {
        send_error_text(s, "bad magic or protocol version (this simulation speaks version 1)");
        return 0;
    }
    memset(rq, 0, sizeof *rq);
    rq->op = op;
    rq->num_envs = s->num_envs;
    if (op == MTRL_HELLO) {
        s->num_envs = rq->num_envs = (int)count;
        s->obs_bytes = s->action_bytes = 0;
        rq->seed = arg;
        return op;
    }
    if (op == MTRL_CLOSE) return op;
    if (op != MTRL_RESET && op != MTRL_STEP) {
        send_error_text(s, "unknown request op");
        return 0;
    }
    if (s->obs_bytes == 0) {
        send_error_text(s, "RESET or STEP before the handshake was answered");
        return 0;
    }
    if (op == MTRL_STEP) {
        size_t want = (size_t)s->num_envs * s->action_bytes;
        if (s->nframes != 3 || zmq_msg_size(&s->frames[1]) != want ||
            zmq_msg_size(&s->frames[2]) != (size_t)s->num_envs) {
            char text[160];
            snprintf(text, sizeof text, "STEP needs 2 frames of %zu and %d bytes", want,
                     s->num_envs);
            send_error_text(s, text);
            return 0;
        }
        rq->actions = zmq_msg_data(&s->frames[1]);
        rq->reset_mask = zmq_msg_data(&s->frames[2]);
    }
    return op;
}

int mtrl_sim_next(mtrl_sim *s, mtrl_request *rq, int timeout_ms) {
    if (s->pending) {
        set_error(s, "mtrl_sim_next called before the last request was answered");
        return MTRL_E_USAGE;
    }
    for (;;) {
        zmq_pollitem_t items[2] = {{s->sock, 0, ZMQ_POLLIN, 0}, {s->monitor, 0, ZMQ_POLLIN, 0}};
        int rc = zmq_poll(items, 2, timeout_ms);
        if (rc < 0) {
            if (zmq_errno() == EINTR) continue;
            set_error(s, "zmq_poll: %s", zmq_strerror(zmq_errno()));
            return MTRL_E_ZMQ;
        }
        if (rc == 0) {
            set_error(s, "no request within %d ms", timeout_ms);
            return MTRL_E_TIMEOUT;
        }
        if ((items[1].revents & ZMQ_POLLIN) && peer_gone(s)) {
            s->num_envs = 0;
            s->obs_bytes = 0;
            set_error(s, "the trainer disconnected or stopped answering heartbeats");
            return MTRL_E_PEER_GONE;
        }
        if (!(items[0].revents & ZMQ_POLLIN)) continue;
        if (recv_message(s) != MTRL_OK) return MTRL_E_ZMQ;
        s->had_peer = 1;
        int op = parse_request(s, rq);
        if (op == 0) continue;
        s->pending = op;
        if (op == MTRL_CLOSE) {
            if (send_parts(s, MTRL_CLOSE, 0, 0, NULL, NULL) != MTRL_OK) return MTRL_E_ZMQ;
        }
        return op;
    }
}

static int expect(mtrl_sim *s, int op) {
    if (s->pending != op) {
        set_error(s, "reply does not match the pending request (%d, expected %d)", op,
                  s->pending);
        return MTRL_E_USAGE;
    }
    return MTRL_OK;
}

int mtrl_sim_reply_hello(mtrl_sim *s, const char *spec_json, size_t obs_bytes,
                         size_t action_bytes) {
    const void *p[1] = {spec_json};
    size_t n[1] = {strlen(spec_json)};
    if (expect(s, MTRL_HELLO) != MTRL_OK) return MTRL_E_USAGE;
    if (obs_bytes == 0 || action_bytes == 0) {
        set_error(s, "obs_bytes and action_bytes must be positive");
        return MTRL_E_USAGE;
    }
    s->obs_bytes = obs_bytes;
    s->action_bytes = action_bytes;
    return send_parts(s, MTRL_HELLO, (uint32_t)s->num_envs, 1, p, n);
}

int mtrl_sim_reply_reset(mtrl_sim *s, const void *obs) {
    const void *p[1] = {obs};
    size_t n[1] = {(size_t)s->num_envs * s->obs_bytes};
    if (expect(s, MTRL_RESET) != MTRL_OK) return MTRL_E_USAGE;
    return send_parts(s, MTRL_RESET, 0, 1, p, n);
}

int mtrl_sim_reply_step(mtrl_sim *s, const void *obs, const float *reward,
                        const uint8_t *terminated, const uint8_t *truncated) {
    size_t k = (size_t)s->num_envs;
    const void *p[4] = {obs, reward, terminated, truncated};
    size_t n[4] = {k * s->obs_bytes, k * sizeof(float), k, k};
    if (expect(s, MTRL_STEP) != MTRL_OK) return MTRL_E_USAGE;
    return send_parts(s, MTRL_STEP, 0, 4, p, n);
}

int mtrl_sim_reply_error(mtrl_sim *s, const char *message) {
    if (!s->pending) {
        set_error(s, "no request to answer");
        return MTRL_E_USAGE;
    }
    return send_error_text(s, message);
}

const char *mtrl_sim_last_error(const mtrl_sim *s) { return s ? s->error : "no simulation"; }

/* Create dir and its missing parents (as mkdir -p). Returns 0 or -1 with errno set. */
static int make_dirs(const char *dir) {
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0') continue;
        char c = path[i];
        path[i] = '\0';
        if (mkdir(path, 0777) < 0 && errno != EEXIST) return -1;
        path[i] = c;
    }
    struct stat st;
    if (stat(dir, &st) < 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* This machine's name as others reach it (its canonical name where the resolver knows one). */
static void host_name(char *out, size_t n) {
    struct addrinfo hints, *info = NULL;
    if (gethostname(out, n) < 0) snprintf(out, n, "localhost");
    out[n - 1] = '\0';
    memset(&hints, 0, sizeof hints);
    hints.ai_flags = AI_CANONNAME;
    if (getaddrinfo(out, NULL, &hints, &info) == 0 && info && info->ai_canonname)
        snprintf(out, n, "%s", info->ai_canonname);
    if (info) freeaddrinfo(info);
}

/* endpoint as another machine reaches it: one bound on every interface under this host name. */
static void reachable(const char *endpoint, char *out, size_t n) {
    static const char *anywhere[] = {"://0.0.0.0:", "://[::]:"};
    for (int k = 0; k < 2; k++) {
        const char *at = strstr(endpoint, anywhere[k]);
        if (!at) continue;
        char host[256];
        host_name(host, sizeof host);
        snprintf(out, n, "%.*s://%s:%s", (int)(at - endpoint), endpoint, host,
                 at + strlen(anywhere[k]));
        return;
    }
    snprintf(out, n, "%s", endpoint);
}

/* A fresh name for an announcement: 32 hex digits from the kernel's random source. */
static void fresh_name(char *out) {
    unsigned char bytes[16];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(bytes, 1, sizeof bytes, f) : 0;
    if (f) fclose(f);
    if (got != sizeof bytes) { /* no /dev/urandom: the process and the clock */
        unsigned long long mix = (unsigned long long)getpid() << 32;
        mix ^= (unsigned long long)time(NULL);
        for (size_t i = 0; i < sizeof bytes; i++)
            bytes[i] = (unsigned char)((mix >> (8 * (i % 8))) ^ i);
    }
    for (size_t i = 0; i < sizeof bytes; i++) sprintf(out + 2 * i, "%02x", bytes[i]);
}

int mtrl_sim_announce(mtrl_sim *s, const char *dir) {
    char endpoint[1024], address[1400], name[33], tmp[4096];
    size_t len = sizeof endpoint;
    if (!s->bound) {
        set_error(s, "mtrl_sim_announce: only a bound socket (bind = 1) can be announced");
        return MTRL_E_USAGE;
    }
    if (s->announced[0]) {
        set_error(s, "mtrl_sim_announce: already announced as %s", s->announced);
        return MTRL_E_USAGE;
    }
    if (zmq_getsockopt(s->sock, ZMQ_LAST_ENDPOINT, endpoint, &len) < 0) {
        set_error(s, "mtrl_sim_announce: %s", zmq_strerror(zmq_errno()));
        return MTRL_E_ZMQ;
    }
    reachable(endpoint, address, sizeof address);
    if (make_dirs(dir) < 0) {
        set_error(s, "mtrl_sim_announce: cannot make the directory %s: %s", dir, strerror(errno));
        return MTRL_E_IO;
    }
    fresh_name(name);
    int full = snprintf(s->announced, sizeof s->announced, "%s/%s.addr", dir, name);
    int part = snprintf(tmp, sizeof tmp, "%s/.%s.addr.%d.tmp", dir, name, (int)getpid());
    if (full >= (int)sizeof s->announced || part >= (int)sizeof tmp) {
        s->announced[0] = '\0';
        set_error(s, "mtrl_sim_announce: the directory's path is too long: %s", dir);
        return MTRL_E_IO;
    }
    FILE *f = fopen(tmp, "w");
    int ok = f && fprintf(f, "%s\n", address) > 0;
    ok = (f && fclose(f) == 0) && ok;
    if (!ok || rename(tmp, s->announced) < 0) { /* a reader never sees half a file */
        set_error(s, "mtrl_sim_announce: cannot write %s: %s", s->announced, strerror(errno));
        unlink(tmp);
        s->announced[0] = '\0';
        return MTRL_E_IO;
    }
    return MTRL_OK;
}

int mtrl_sim_withdraw(mtrl_sim *s) {
    if (s && s->announced[0]) {
        if (unlink(s->announced) < 0 && errno != ENOENT) {
            set_error(s, "mtrl_sim_withdraw: cannot remove %s: %s", s->announced, strerror(errno));
            return MTRL_E_IO;
        }
        s->announced[0] = '\0';
    }
    return MTRL_OK;
}

void mtrl_sim_close(mtrl_sim *s) {
    if (!s) return;
    mtrl_sim_withdraw(s); /* first: mtrl reads the file's absence as a goodbye */
    drop_frames(s);
    if (s->sock) {
        zmq_socket_monitor(s->sock, NULL, 0);
        zmq_close(s->sock);
    }
    if (s->monitor) {
        int zero = 0;
        zmq_setsockopt(s->monitor, ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(s->monitor);
    }
    if (s->ctx) zmq_ctx_term(s->ctx);
    free(s);
}
