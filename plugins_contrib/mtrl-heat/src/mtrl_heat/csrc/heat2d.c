/* 2-D heat equation with four heaters, MPI-parallel, coupled to mtrl through the C client.
 *
 *   u_t = alpha (u_xx + u_yy) + sum_k a_k b_k(x, y)   on the unit square, u = 0 on its edge,
 *
 * b_k Gaussian heaters (width 0.1) centred at (0.25|0.75, 0.25|0.75), intensities a_k in
 * [-1, 1] held over one control interval dt. Finite differences on an n x n interior grid
 * (h = 1/(n+1)); explicit Euler in time (FTCS) with the interval split into substeps of
 * r = alpha tau / h^2 <= 0.2 (stable below 0.25). The grid rows are split into contiguous
 * strips over the MPI ranks; one halo exchange of a row above and below per substep, for all
 * copies at once (fields are stored row-major with the copies interleaved within a row).
 *
 * Task: each episode draws a*, a0 ~ U[-1, 1]^4 per copy; the target is the steady state of a*
 * (reachable by construction), the start the steady state of a0. Steady responses S_k of each
 * heater are computed exactly (discrete sine transform) on every rank at start-up and scaled so
 * that max S_k = 1 (b_k with them). Observation (float32, 33): u at a 4 x 4 grid of sensors,
 * the target there, and t / horizon. Reward -mean_grid (u - target)^2 - cost * sum_k a_k^2.
 * With --init sine the start is sin(pi x) sin(pi y) and the target 0 (for the decay test).
 *
 * Rank 0 speaks to mtrl and broadcasts each request; the other ranks wait in a polling loop
 * that sleeps (MPICH otherwise spins at 100% CPU between requests).
 *
 * Usage: heat2d ADDRESS [--n 32] [--alpha 0.1] [--dt 0.05] [--horizon 100] [--cost 0.01]
 *                       [--init steady|sine]
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mtrl_coupling.h"

#define K 4     /* heaters */
#define SIDE 4  /* sensors per side */
#define M (SIDE * SIDE)
#define OBS (2 * M + 1)
#define STOP 0

typedef struct {
    int n, horizon, sine, rank, size, r0, rows, substeps;
    double alpha, dt, cost, h, r;
    double *resp; /* K x rows x n: steady responses, local rows */
    double *src;  /* K x rows x n: heater sources, local rows */
    int sensor_i[M], sensor_j[M];
} Grid;

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { return 2.0 * (splitmix(s) >> 11) * 0x1.0p-53 - 1.0; }

/* Exact steady state of -alpha lap(s) = b for every heater (full grid, every rank), then the
 * local rows of responses and sources, both scaled by 1 / max(S_k). */
static void steady_responses(Grid *g) {
    int n = g->n;
    double h = g->h, w = 0.1;
    double *S = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n);
    double *tmp = malloc(sizeof(double) * n * n), *lam = malloc(sizeof(double) * n);
    for (int j = 0; j < n; j++)
        for (int p = 0; p < n; p++) S[j * n + p] = sin((p + 1) * M_PI * (j + 1) * h);
    for (int p = 0; p < n; p++) {
        double sp = sin((p + 1) * M_PI * h / 2);
        lam[p] = 4.0 * sp * sp / (h * h);
    }
    g->resp = malloc(sizeof(double) * K * g->rows * n);
    g->src = malloc(sizeof(double) * K * g->rows * n);
    for (int k = 0; k < K; k++) {
        double cx = (k % 2) ? 0.75 : 0.25, cy = (k / 2) ? 0.75 : 0.25;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double x = (j + 1) * h - cx, y = (i + 1) * h - cy;
                b[i * n + j] = exp(-(x * x + y * y) / (2 * w * w));
            }
        /* bhat = S^T b S, divided by alpha (lam_p + lam_q), back: s = S bhat S^T (4/(n+1)^2) */
        for (int i = 0; i < n; i++)
            for (int q = 0; q < n; q++) {
                double acc = 0;
                for (int j = 0; j < n; j++) acc += b[i * n + j] * S[j * n + q];
                tmp[i * n + q] = acc;
            }
        for (int p = 0; p < n; p++)
            for (int q = 0; q < n; q++) {
                double acc = 0;
                for (int i = 0; i < n; i++) acc += S[i * n + p] * tmp[i * n + q];
                b[p * n + q] = acc / (g->alpha * (lam[p] + lam[q]));
            }
        for (int p = 0; p < n; p++)
            for (int j = 0; j < n; j++) {
                double acc = 0;
                for (int q = 0; q < n; q++) acc += b[p * n + q] * S[j * n + q];
                tmp[p * n + j] = acc;
            }
        double scale = 4.0 / ((n + 1.0) * (n + 1.0)), peak = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double acc = 0;
                for (int p = 0; p < n; p++) acc += S[i * n + p] * tmp[p * n + j];
                b[i * n + j] = acc * scale; /* b now holds the response */
                if (fabs(b[i * n + j]) > peak) peak = fabs(b[i * n + j]);
            }
        for (int i = 0; i < g->rows; i++)
            for (int j = 0; j < n; j++) {
                int gi = g->r0 + i;
                double x = (j + 1) * h - cx, y = (gi + 1) * h - cy;
                g->resp[(k * g->rows + i) * n + j] = b[gi * n + j] / peak;
                g->src[(k * g->rows + i) * n + j] = exp(-(x * x + y * y) / (2 * w * w)) / peak;
            }
    }
    free(S); free(b); free(tmp); free(lam);
}

/* Non-root ranks wait for the broadcast without spinning the CPU flat out. */
static void bcast(void *buf, int count, MPI_Datatype type, Grid *g) {
    MPI_Request req;
    int done = 0;
    long sleep_ns = 1000;
    MPI_Ibcast(buf, count, type, 0, MPI_COMM_WORLD, &req);
    if (g->rank == 0) {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return;
    }
    for (int spins = 0;; spins++) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) return;
        if (spins > 50) {
            struct timespec ts = {0, sleep_ns};
            nanosleep(&ts, NULL);
            if (sleep_ns < 500000) sleep_ns *= 2;
        }
    }
}

/* One control interval for every live copy. u: (rows + 2) x nc x n with ghost rows. */
static void advance(Grid *g, double *u, double *un, const double *a, const unsigned char *live,
                    int nc) {
    int n = g->n, rows = g->rows, stride = nc * n;
    int up = g->rank > 0 ? g->rank - 1 : MPI_PROC_NULL;
    int down = g->rank < g->size - 1 ? g->rank + 1 : MPI_PROC_NULL;
    double tau = g->dt / g->substeps, r = g->r;
    double *f = malloc(sizeof(double) * rows * stride);
    for (int i = 0; i < rows; i++)
        for (int c = 0; c < nc; c++)
            for (int j = 0; j < n; j++) {
                double acc = 0;
                for (int k = 0; k < K; k++) acc += a[c * K + k] * g->src[(k * rows + i) * n + j];
                f[i * stride + c * n + j] = tau * acc;
            }
    for (int s = 0; s < g->substeps; s++) {
        MPI_Sendrecv(u + 1 * stride, stride, MPI_DOUBLE, up, 0, u + (rows + 1) * stride, stride,
                     MPI_DOUBLE, down, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(u + rows * stride, stride, MPI_DOUBLE, down, 1, u, stride, MPI_DOUBLE, up, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 1; i <= rows; i++)
            for (int c = 0; c < nc; c++) {
                if (!live[c]) continue;
                const double *ui = u + i * stride + c * n;
                double *o = un + i * stride + c * n;
                for (int j = 0; j < n; j++) {
                    double left = j > 0 ? ui[j - 1] : 0.0, right = j < n - 1 ? ui[j + 1] : 0.0;
                    o[j] = ui[j] + r * (ui[j - stride] + ui[j + stride] + left + right - 4 * ui[j]) +
                           f[(i - 1) * stride + c * n + j];
                }
            }
        for (int i = 1; i <= rows; i++)
            for (int c = 0; c < nc; c++)
                if (live[c]) memcpy(u + i * stride + c * n, un + i * stride + c * n, n * sizeof(double));
    }
    free(f);
}

static void start_copy(Grid *g, double *u, double *target, int c, int nc, const double *draw) {
    int n = g->n, stride = nc * n;
    for (int i = 0; i < g->rows; i++)
        for (int j = 0; j < n; j++) {
            double s0 = 0, st = 0;
            if (g->sine) {
                s0 = sin(M_PI * (g->r0 + i + 1) * g->h) * sin(M_PI * (j + 1) * g->h);
            } else {
                for (int k = 0; k < K; k++) {
                    double rk = g->resp[(k * g->rows + i) * n + j];
                    st += draw[k] * rk;
                    s0 += draw[K + k] * rk;
                }
            }
            u[(i + 1) * stride + c * n + j] = s0;
            target[i * stride + c * n + j] = st;
        }
}

/* Per copy: M sensor values, M target values, sum of squared errors -> summed onto rank 0. */
static void measure(Grid *g, const double *u, const double *target, int nc, double *out,
                    double *sum) {
    int n = g->n, stride = nc * n, per = 2 * M + 1;
    memset(out, 0, sizeof(double) * nc * per);
    for (int c = 0; c < nc; c++) {
        for (int m = 0; m < M; m++) {
            int i = g->sensor_i[m] - g->r0, j = g->sensor_j[m];
            if (i < 0 || i >= g->rows) continue;
            out[c * per + m] = u[(i + 1) * stride + c * n + j];
            out[c * per + M + m] = target[i * stride + c * n + j];
        }
        double e = 0;
        for (int i = 0; i < g->rows; i++)
            for (int j = 0; j < n; j++) {
                double d = u[(i + 1) * stride + c * n + j] - target[i * stride + c * n + j];
                e += d * d;
            }
        out[c * per + 2 * M] = e;
    }
    MPI_Reduce(out, sum, nc * per, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
}

static const char *arg(int argc, char **argv, const char *name, const char *dflt) {
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return argv[i + 1];
    return dflt;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    Grid g = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g.size);
    if (argc < 2) {
        if (g.rank == 0) fprintf(stderr, "usage: heat2d ADDRESS [options]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    g.n = atoi(arg(argc, argv, "--n", "32"));
    g.alpha = atof(arg(argc, argv, "--alpha", "0.1"));
    g.dt = atof(arg(argc, argv, "--dt", "0.05"));
    g.horizon = atoi(arg(argc, argv, "--horizon", "100"));
    g.cost = atof(arg(argc, argv, "--cost", "0.01"));
    g.sine = !strcmp(arg(argc, argv, "--init", "steady"), "sine");
    g.h = 1.0 / (g.n + 1);
    g.substeps = (int)ceil(g.alpha * g.dt / (0.2 * g.h * g.h));
    g.r = g.alpha * (g.dt / g.substeps) / (g.h * g.h);
    g.r0 = (int)((long)g.n * g.rank / g.size);
    g.rows = (int)((long)g.n * (g.rank + 1) / g.size) - g.r0;
    for (int m = 0; m < M; m++) {
        g.sensor_i[m] = (int)(((m / SIDE) + 0.5) / SIDE * g.n);
        g.sensor_j[m] = (int)(((m % SIDE) + 0.5) / SIDE * g.n);
    }
    steady_responses(&g);

    mtrl_sim *s = NULL;
    if (g.rank == 0 && !(s = mtrl_sim_open(argv[1], 0, 1.0))) MPI_Abort(MPI_COMM_WORLD, 1);
    char spec[512];
    snprintf(spec, sizeof spec,
             "{\"protocol\": 1, \"name\": \"heat2d\", \"observation\": {\"dtype\": \"float32\","
             " \"shape\": [%d], \"low\": null, \"high\": null}, \"action\": {\"type\": \"box\","
             " \"dtype\": \"float32\", \"shape\": [%d], \"low\": -1.0, \"high\": 1.0},"
             " \"max_episode_steps\": %d}",
             OBS, K, g.horizon);

    int nc = 0;
    uint64_t *rng = NULL;
    double *u = NULL, *un = NULL, *target = NULL, *msg = NULL, *part = NULL, *sum = NULL;
    long *t = NULL;
    float *obs = NULL, *reward = NULL;
    unsigned char *term = NULL, *trunc = NULL, *live = NULL;
    int rc = 0;
    for (;;) {
        /* rank 0: [op, nc] then, after HELLO, nc x (K actions, mask, 2K draws) */
        double head[2] = {0, 0};
        mtrl_request rq;
        int op = 0;
        if (g.rank == 0) {
            op = mtrl_sim_next(s, &rq, -1);
            if (op < 0) {
                fprintf(stderr, "heat2d: %s\n", mtrl_sim_last_error(s));
                rc = op == MTRL_E_PEER_GONE ? 0 : 1;
                op = STOP;
            }
            if (op == MTRL_CLOSE) op = STOP;
            head[0] = op;
            head[1] = op == MTRL_HELLO ? rq.num_envs : nc;
        }
        bcast(head, 2, MPI_DOUBLE, &g);
        op = (int)head[0];
        if (op == STOP) break;
        if (op == MTRL_HELLO) {
            nc = (int)head[1];
            size_t field = (size_t)(g.rows + 2) * nc * g.n;
            u = realloc(u, sizeof(double) * field);
            un = realloc(un, sizeof(double) * field);
            memset(u, 0, sizeof(double) * field);
            memset(un, 0, sizeof(double) * field);
            target = realloc(target, sizeof(double) * g.rows * nc * g.n);
            msg = realloc(msg, sizeof(double) * nc * (3 * K + 1));
            part = realloc(part, sizeof(double) * nc * (2 * M + 1));
            sum = realloc(sum, sizeof(double) * nc * (2 * M + 1));
            live = realloc(live, nc);
            t = realloc(t, sizeof(long) * nc);
            if (g.rank == 0) {
                rng = realloc(rng, sizeof(uint64_t) * nc);
                for (int c = 0; c < nc; c++) rng[c] = (uint64_t)(rq.seed + c);
                obs = realloc(obs, sizeof(float) * nc * OBS);
                reward = realloc(reward, sizeof(float) * nc);
                term = realloc(term, nc);
                trunc = realloc(trunc, nc);
                mtrl_sim_reply_hello(s, spec, OBS * sizeof(float), K * sizeof(float));
            }
            continue;
        }
        if (g.rank == 0) { /* per copy: K actions, reset flag, 2K draws */
            for (int c = 0; c < nc; c++) {
                double *mc = msg + c * (3 * K + 1);
                int fresh = op == MTRL_RESET || rq.reset_mask[c];
                for (int k = 0; k < K; k++)
                    mc[k] = op == MTRL_STEP ? ((const float *)rq.actions)[c * K + k] : 0.0;
                mc[K] = fresh;
                for (int k = 0; k < 2 * K; k++) mc[K + 1 + k] = fresh ? uniform(&rng[c]) : 0.0;
            }
        }
        bcast(msg, nc * (3 * K + 1), MPI_DOUBLE, &g);
        double *a = malloc(sizeof(double) * nc * K);
        for (int c = 0; c < nc; c++) {
            double *mc = msg + c * (3 * K + 1);
            live[c] = !mc[K];
            for (int k = 0; k < K; k++) a[c * K + k] = fmax(-1.0, fmin(1.0, mc[k]));
            if (mc[K]) {
                start_copy(&g, u, target, c, nc, mc + K + 1);
                t[c] = 0;
            } else {
                t[c] += 1;
            }
        }
        int any = 0;
        for (int c = 0; c < nc; c++) any |= live[c];
        if (any) advance(&g, u, un, a, live, nc); /* every rank knows live: all skip or none */
        measure(&g, u, target, nc, part, sum);
        if (g.rank == 0) {
            for (int c = 0; c < nc; c++) {
                double *sc = sum + c * (2 * M + 1), cost = 0;
                for (int m = 0; m < 2 * M; m++) obs[c * OBS + m] = (float)sc[m];
                obs[c * OBS + 2 * M] = (float)t[c] / g.horizon;
                for (int k = 0; k < K; k++) cost += a[c * K + k] * a[c * K + k];
                reward[c] = live[c] ? (float)(-sc[2 * M] / ((double)g.n * g.n) - g.cost * cost) : 0.0f;
                term[c] = trunc[c] = 0;
            }
            if (op == MTRL_RESET)
                mtrl_sim_reply_reset(s, obs);
            else
                mtrl_sim_reply_step(s, obs, reward, term, trunc);
        }
        free(a);
    }
    if (g.rank == 0) mtrl_sim_close(s);
    free(u); free(un); free(target); free(msg); free(part); free(sum); free(live); free(t);
    free(rng); free(obs); free(reward); free(term); free(trunc); free(g.resp); free(g.src);
    MPI_Finalize();
    return rc;
}
