/* mtrl coupling protocol, version 1: the C client for simulation codes.
 *
 * Couples a simulation to mtrl over ZeroMQ (docs/COUPLING.md is the full specification).
 * The simulation answers requests in a loop; only rank 0 of an MPI code calls these functions
 * and relays each request to the other ranks itself:
 *
 *     mtrl_sim *s = mtrl_sim_open(argv[1], 0, 1.0);   // connect to the address mtrl bound
 *     mtrl_request rq;
 *     for (;;) {
 *         int op = mtrl_sim_next(s, &rq, -1);
 *         if (op == MTRL_HELLO)  { allocate rq.num_envs copies, seed from rq.seed;
 *                                  mtrl_sim_reply_hello(s, spec_json, obs_bytes, act_bytes); }
 *         else if (op == MTRL_RESET) { reset all copies; mtrl_sim_reply_reset(s, obs); }
 *         else if (op == MTRL_STEP)  { copies with rq.reset_mask[i] are reset, the others step
 *                                      with their slice of rq.actions;
 *                                      mtrl_sim_reply_step(s, obs, reward, term, trunc); }
 *         else break;               // MTRL_CLOSE (already acknowledged) or an error (< 0)
 *     }
 *     mtrl_sim_close(s);
 *
 * All arrays are C-order, little-endian, batch-major (copy 0 first). Reply with
 * mtrl_sim_reply_error(s, "what went wrong") instead of a normal reply to make mtrl raise it.
 * Not thread-safe: one mtrl_sim per thread.
 */
#ifndef MTRL_COUPLING_H
#define MTRL_COUPLING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MTRL_PROTOCOL_VERSION 1

/* Request kinds (also the op codes on the wire). */
enum { MTRL_HELLO = 1, MTRL_RESET = 2, MTRL_STEP = 3, MTRL_CLOSE = 4, MTRL_ERROR = 5 };

/* Errors returned by mtrl_sim_next (negative) and the reply functions. */
enum {
    MTRL_OK = 0,
    MTRL_E_TIMEOUT = -1,   /* nothing arrived within timeout_ms */
    MTRL_E_PEER_GONE = -2, /* the trainer disconnected or stopped answering heartbeats */
    MTRL_E_ZMQ = -3,       /* a ZeroMQ call failed; see mtrl_sim_last_error */
    MTRL_E_USAGE = -4,     /* a reply that does not fit the request (wrong order or size) */
    MTRL_E_IO = -5         /* a file could not be written or removed; see mtrl_sim_last_error */
};

typedef struct mtrl_sim mtrl_sim;

/* One request from mtrl, filled by mtrl_sim_next. Pointers stay valid until the next call. */
typedef struct {
    int op;                    /* MTRL_HELLO, MTRL_RESET, MTRL_STEP or MTRL_CLOSE */
    int num_envs;              /* HELLO: how many copies to serve (constant afterwards) */
    int64_t seed;              /* HELLO: base seed; copy i conventionally uses seed + i */
    const void *actions;       /* STEP: num_envs * action_bytes bytes */
    const uint8_t *reset_mask; /* STEP: num_envs flags; 1 = reset this copy instead */
} mtrl_request;

/* Open the socket. bind = 0: connect to address (mtrl launched us); bind = 1: bind it and wait
 * for mtrl to attach. heartbeat_s: ZeroMQ heartbeat interval (the peer is gone after three
 * silent intervals); <= 0 means 1.0. Returns NULL on failure (message on stderr).
 * Security comes from the environment (docs/COUPLING.md, section 2): MTRL_CURVE_SECRET_KEY
 * makes the socket a CURVE server (mtrl sets it for codes it launches over tcp://; refused
 * with a message if this libzmq lacks CURVE); without it, plain tcp:// on an address that is
 * not loopback is refused unless MTRL_COUPLING_INSECURE=1. MTRL_MAX_MESSAGE_BYTES bounds each
 * frame received (default 64 MiB): libzmq drops a peer that announces a larger one. */
mtrl_sim *mtrl_sim_open(const char *address, int bind, double heartbeat_s);

/* Wait up to timeout_ms (-1: forever) for the next request. Returns its op (> 0) or an error
 * (< 0). CLOSE is acknowledged before it is returned. A malformed request is answered with an
 * ERROR by the library and skipped. With bind = 1, MTRL_E_PEER_GONE means the trainer left:
 * call again to wait for the next one (it starts with HELLO). */
int mtrl_sim_next(mtrl_sim *s, mtrl_request *rq, int timeout_ms);

/* Answer HELLO with the JSON spec (docs/COUPLING.md) and the byte sizes of one copy's
 * observation and action, which the library uses to check every later message. */
int mtrl_sim_reply_hello(mtrl_sim *s, const char *spec_json, size_t obs_bytes,
                         size_t action_bytes);

/* Answer RESET: num_envs observations. */
int mtrl_sim_reply_reset(mtrl_sim *s, const void *obs);

/* Answer STEP: num_envs observations, rewards, terminated and truncated flags (0 or 1). */
int mtrl_sim_reply_step(mtrl_sim *s, const void *obs, const float *reward,
                        const uint8_t *terminated, const uint8_t *truncated);

/* Answer the pending request with an error; mtrl raises it as a fault of this env. */
int mtrl_sim_reply_error(mtrl_sim *s, const char *message);

/* The last error's text (never NULL). */
const char *mtrl_sim_last_error(const mtrl_sim *s);

/* Attach mode's members that join a running training (docs/COUPLING.md, "Members that join
 * and leave"): after mtrl_sim_open(address, 1, ...) (e.g. "tcp://0.0.0.0:*", any free port),
 * write <dir>/<fresh name>.addr holding the address mtrl reaches this socket at (the host's
 * name for 0.0.0.0), atomically, creating dir if needed (the task's env_kwargs.members_dir;
 * on a cluster, a shared file system). A training that watches dir attaches to this code as a
 * new member of its batch. Returns MTRL_OK, MTRL_E_USAGE (not bound, or announced already),
 * MTRL_E_ZMQ or MTRL_E_IO (see mtrl_sim_last_error). */
int mtrl_sim_announce(mtrl_sim *s, const char *dir);

/* Leave cleanly: remove the announcement (mtrl reads its absence, when the connection then
 * drops, as a goodbye: the member's episodes are cut and its slot freed, no fault counted).
 * Call it, then mtrl_sim_close, instead of answering the pending request. A code that dies
 * without it is counted as vanished. mtrl_sim_close withdraws too. Safe when not announced. */
int mtrl_sim_withdraw(mtrl_sim *s);

/* Close the socket and free everything (withdrawing an announcement first). Safe on NULL. */
void mtrl_sim_close(mtrl_sim *s);

#ifdef __cplusplus
}
#endif
#endif /* MTRL_COUPLING_H */
