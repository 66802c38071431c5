/* The C twin of drift_sim.py, written against the C client (mtrl_coupling.h): same dynamics,
 * same starts, so the coupling tests can check that both clients produce identical batches.
 * Usage: drift_sim ADDRESS [crash-at-step] (mtrl launched it: connect to ADDRESS), or
 * drift_sim --announce DIR [goodbye-at-step] (a member that joins a running training: bind any
 * free loopback port, announce it in DIR, and at that step leave cleanly; it exits when the
 * training is gone). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtrl_coupling.h"

#define LIMIT 20

static const char *SPEC =
    "{\"protocol\": 1, \"name\": \"drift\","
    " \"observation\": {\"dtype\": \"float32\", \"shape\": [2]},"
    " \"action\": {\"type\": \"box\", \"dtype\": \"float32\", \"shape\": [1],"
    " \"low\": -1.0, \"high\": 1.0},"
    " \"max_episode_steps\": 20}";

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "--announce") == 0 && argc < 3)) {
        fprintf(stderr, "usage: %s ADDRESS [crash-at-step] | --announce DIR [goodbye-at-step]\n",
                argv[0]);
        return 2;
    }
    int joins = strcmp(argv[1], "--announce") == 0;
    long crash_at = argc > 2 + joins ? atol(argv[2 + joins]) : 0, steps = 0;
    mtrl_sim *s = mtrl_sim_open(joins ? "tcp://127.0.0.1:*" : argv[1], joins, 1.0);
    if (!s) return 1;
    if (joins && mtrl_sim_announce(s, argv[2]) != MTRL_OK) {
        fprintf(stderr, "drift_sim: %s\n", mtrl_sim_last_error(s));
        mtrl_sim_close(s);
        return 1;
    }
    int n = 0;
    int64_t seed = 0;
    float *x = NULL, *obs = NULL, *reward = NULL;
    long *t = NULL;
    uint8_t *term = NULL, *trunc = NULL;
    mtrl_request rq;
    int rc = 0;
    for (;;) {
        int op = mtrl_sim_next(s, &rq, -1);
        if (op == MTRL_HELLO) {
            n = rq.num_envs;
            seed = rq.seed;
            x = realloc(x, n * sizeof *x);
            t = realloc(t, n * sizeof *t);
            obs = realloc(obs, 2 * n * sizeof *obs);
            reward = realloc(reward, n * sizeof *reward);
            term = realloc(term, n);
            trunc = realloc(trunc, n);
            mtrl_sim_reply_hello(s, SPEC, 2 * sizeof(float), sizeof(float));
            continue;
        }
        if (op == MTRL_RESET || op == MTRL_STEP) {
            const float *a = rq.actions;
            if (op == MTRL_STEP && crash_at && ++steps == crash_at) {
                if (!joins) abort();
                mtrl_sim_withdraw(s); /* goodbye: leave without answering */
                break;
            }
            for (int i = 0; i < n; i++) {
                int fresh = op == MTRL_RESET || rq.reset_mask[i];
                reward[i] = 0.0f;
                term[i] = trunc[i] = 0;
                if (fresh) {
                    x[i] = (float)((((seed + i) % 7) - 3) / 3.0);
                    t[i] = 0;
                } else {
                    x[i] += 0.1f * a[i];
                    t[i] += 1;
                    reward[i] = -x[i] * x[i];
                    term[i] = fabsf(x[i]) > 2.0f;
                }
                obs[2 * i] = x[i];
                obs[2 * i + 1] = (float)t[i] / LIMIT;
            }
            if (op == MTRL_RESET)
                mtrl_sim_reply_reset(s, obs);
            else
                mtrl_sim_reply_step(s, obs, reward, term, trunc);
            continue;
        }
        if (op < 0) {
            fprintf(stderr, "drift_sim: %s\n", mtrl_sim_last_error(s));
            rc = op == MTRL_E_PEER_GONE ? 0 : 1;
        }
        break; /* MTRL_CLOSE or an error */
    }
    mtrl_sim_close(s);
    free(x); free(t); free(obs); free(reward); free(term); free(trunc);
    return rc;
}
