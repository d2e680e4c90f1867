// mqtt-baseline: the C libmosquitto baseline for the CoatyMQTT benchmarks.
//
// Roles (each one process, driven by Benchmarks/run through the mqtt-benchmark driver):
//   mqtt-baseline sub HOST PORT TOPIC COUNT            count COUNT messages, print JSON result
//   mqtt-baseline pub HOST PORT TOPIC COUNT SIZE [TOPIC2]
//                                                      publish COUNT QoS 0 messages of SIZE bytes (each
//                                                      also on TOPIC2 when given, as a custom-type
//                                                      Coaty Advertise goes to two topics)
//   mqtt-baseline responder HOST PORT [--coaty]        answer every message on bench/req on bench/rsp
//   mqtt-baseline requester HOST PORT COUNT [--coaty]  COUNT sequential round trips, print JSON percentiles
//   mqtt-baseline coaty-resolver HOST PORT FILE        answer Coaty Discover-by-objectId events (namespace "-")
//                                                      from FILE's objects (one JSON object per line) held in
//                                                      memory, as a Resolve {"object":…} on the response topic:
//                                                      the C floor of a Discover responder (Benchmarks/run coatyjs)
//
// --coaty: the request pattern of Coaty's two-way events, without JSON: the requester is subscribed to the
// request topic too (an agent observes Discover, so it receives its own), subscribes a fresh response topic
// bench/rsp/<i> for every request without waiting for the SUBACK, publishes the request right behind it, takes
// the response (skipping the echo of its request) and unsubscribes without waiting; the responder answers on the
// topic named by the request. Both use TCP_NODELAY and renew TCP_QUICKACK before every loop wait, as CoatyMQTT
// does (with the broker's Nagle on, a SUBACK written right after an UNSUBACK otherwise waits for a delayed ACK).
//
// Received messages are handed from the libmosquitto thread to an application thread through a
// mutex + condition queue, as an application doing real work would (and as CoatyMQTT does).
#include <mosquitto.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// ---- hand-off queue (libmosquitto thread -> application thread) ----
typedef struct item { struct item *next; int len; char *payload; char *topic; } item;
static pthread_mutex_t q_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;
static item *q_head = NULL, *q_tail = NULL;
static volatile int subscribed = 0;

static void q_push_topic(const void *payload, int len, const char *topic) {
    item *it = malloc(sizeof(item));
    it->next = NULL;
    it->topic = topic ? strdup(topic) : NULL;
    it->len = len;
    it->payload = malloc(len > 0 ? len : 1);
    memcpy(it->payload, payload, len);
    pthread_mutex_lock(&q_mutex);
    if (q_tail) q_tail->next = it; else q_head = it;
    q_tail = it;
    pthread_cond_signal(&q_cond);
    pthread_mutex_unlock(&q_mutex);
}

static void q_push(const void *payload, int len) { q_push_topic(payload, len, NULL); }

static item *q_pop(void) {
    pthread_mutex_lock(&q_mutex);
    while (!q_head) pthread_cond_wait(&q_cond, &q_mutex);
    item *it = q_head;
    q_head = it->next;
    if (!q_head) q_tail = NULL;
    pthread_mutex_unlock(&q_mutex);
    return it;
}

/* The next item, or NULL when none arrived for `seconds` (a stalled run ends with what it received, which the driver
   reports as a loss, instead of hanging). */
static item *q_pop_within(int seconds) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += seconds;
    pthread_mutex_lock(&q_mutex);
    while (!q_head) {
        if (pthread_cond_timedwait(&q_cond, &q_mutex, &deadline) != 0 && !q_head) {
            pthread_mutex_unlock(&q_mutex);
            return NULL;
        }
    }
    item *it = q_head;
    q_head = it->next;
    if (!q_head) q_tail = NULL;
    pthread_mutex_unlock(&q_mutex);
    return it;
}

static void on_message(struct mosquitto *m, void *ud, const struct mosquitto_message *msg) {
    (void)m; (void)ud;
    q_push(msg->payload, msg->payloadlen);
}

static void on_message_topic(struct mosquitto *m, void *ud, const struct mosquitto_message *msg) {
    (void)m; (void)ud;
    q_push_topic(msg->payload, msg->payloadlen, msg->topic);
}

static void on_subscribe(struct mosquitto *m, void *ud, int mid, int n, const int *granted) {
    (void)m; (void)ud; (void)mid; (void)n; (void)granted;
    subscribed = 1;
}

static struct mosquitto *connect_client(const char *id, const char *host, int port) {
    struct mosquitto *m = mosquitto_new(id, true, NULL);
    if (!m) { fprintf(stderr, "mosquitto_new failed\n"); exit(1); }
    mosquitto_message_callback_set(m, on_message);
    mosquitto_subscribe_callback_set(m, on_subscribe);
    if (mosquitto_connect(m, host, port, 60) != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "cannot connect to %s:%d\n", host, port);
        exit(1);
    }
    mosquitto_loop_start(m);
    return m;
}

/// The network loop of a --coaty client: TCP_QUICKACK renewed before every wait (Linux).
static void *quickack_loop(void *arg) {
    struct mosquitto *m = arg;
    int one = 1;
    for (;;) {
        int sock = mosquitto_socket(m);
#ifdef TCP_QUICKACK
        if (sock >= 0) setsockopt(sock, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
#endif
        if (mosquitto_loop(m, 1000, 1) != MOSQ_ERR_SUCCESS) {
            usleep(10000);
            mosquitto_reconnect(m);
        }
    }
    return NULL;
}

static struct mosquitto *connect_coaty_client(const char *id, const char *host, int port) {
    struct mosquitto *m = mosquitto_new(id, true, NULL);
    if (!m) { fprintf(stderr, "mosquitto_new failed\n"); exit(1); }
    mosquitto_message_callback_set(m, on_message);
    mosquitto_subscribe_callback_set(m, on_subscribe);
    mosquitto_threaded_set(m, true);
    mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1);
    if (mosquitto_connect(m, host, port, 60) != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "cannot connect to %s:%d\n", host, port);
        exit(1);
    }
    pthread_t thread;
    pthread_create(&thread, NULL, quickack_loop, m);
    pthread_detach(thread);
    return m;
}

static void subscribe_and_wait(struct mosquitto *m, const char *topic) {
    subscribed = 0;
    mosquitto_subscribe(m, NULL, topic, 0);
    while (!subscribed) usleep(1000);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/// Stops the responder and prints the round trips' percentiles.
static void finish_requests(struct mosquitto *m, uint64_t *samples, long count) {
    mosquitto_publish(m, NULL, "bench/req", 4, "stop", 0, false);
    qsort(samples, (size_t)count, sizeof(uint64_t), cmp_u64);
    printf("{\"count\":%ld,\"p50\":%.1f,\"p99\":%.1f}\n", count, samples[count / 2] / 1000.0,
           samples[(count * 99) / 100] / 1000.0);
    fflush(stdout);
    usleep(100000);
}

/// An object a coaty-resolver answers with: its objectId and the Resolve payload.
typedef struct { char id[37]; int len; char *answer; } resolvable;

static int cmp_resolvable(const void *a, const void *b) {
    return strcmp(((const resolvable *)a)->id, ((const resolvable *)b)->id);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: mqtt-baseline sub|pub|responder|requester HOST PORT ...\n");
        return 2;
    }
    const char *role = argv[1], *host = argv[2];
    int port = atoi(argv[3]);
    mosquitto_lib_init();
    char id[64];
    snprintf(id, sizeof id, "baseline-%s-%d", role, (int)getpid());

    if (strcmp(role, "sub") == 0 && argc >= 6) {
        long count = atol(argv[5]);
        struct mosquitto *m = connect_client(id, host, port);
        subscribe_and_wait(m, argv[4]);
        printf("ready\n");
        fflush(stdout);
        uint64_t first = 0, last = 0;
        long received = 0;
        size_t bytes = 0;
        bool stalled = false;
        while (received < count) {
            /* As the Swift subscriber's watchdog, more leniently: 10 s without a message ends the run. */
            item *it = q_pop_within(10);
            if (!it) {
                stalled = true;
                break;
            }
            if (received == 0) first = now_ns();
            received++;
            bytes += (size_t)it->len;
            free(it->payload);
            free(it);
        }
        if (!stalled) last = now_ns();
        double secs = received > 0 && last > first ? (double)(last - first) / 1e9 : 0.0;
        printf("{\"received\":%ld,\"bytes\":%zu,\"seconds\":%.6f,\"perSecond\":%.1f,\"stalled\":%s}\n", received,
               bytes, secs, secs > 0 ? (double)(received - 1) / secs : 0.0, stalled ? "true" : "false");
        fflush(stdout);
        mosquitto_disconnect(m);
        mosquitto_loop_stop(m, false);
        return 0;
    }
    if (strcmp(role, "pub") == 0 && argc >= 7) {
        long count = atol(argv[5]);
        int size = atoi(argv[6]);
        const char *second = argc >= 8 ? argv[7] : NULL;
        char *payload = malloc((size_t)size);
        memset(payload, 'x', (size_t)size);
        struct mosquitto *m = connect_client(id, host, port);
        for (long i = 0; i < count; i++) {
            int rc;
            for (int t = 0; t < (second ? 2 : 1); t++) {
                const char *topic = t == 0 ? argv[4] : second;
                while ((rc = mosquitto_publish(m, NULL, topic, size, payload, 0, false)) == MOSQ_ERR_NOMEM) usleep(100);
                if (rc != MOSQ_ERR_SUCCESS) { fprintf(stderr, "publish failed: %s\n", mosquitto_strerror(rc)); return 1; }
            }
        }
        // Let the network thread flush everything before disconnecting.
        mosquitto_disconnect(m);
        mosquitto_loop_stop(m, false);
        printf("{\"published\":%ld}\n", count);
        return 0;
    }
    if (strcmp(role, "coaty-resolver") == 0 && argc >= 5) {
        // The objects, sorted by objectId for a binary search (the in-memory lookup of a responder).
        FILE *f = fopen(argv[4], "r");
        if (!f) { fprintf(stderr, "cannot read %s\n", argv[4]); return 1; }
        size_t cap = 1024, n = 0;
        resolvable *objects = malloc(cap * sizeof(resolvable));
        char *line = NULL;
        size_t size = 0;
        ssize_t len;
        while ((len = getline(&line, &size, f)) > 0) {
            while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
            const char *id = strstr(line, "\"objectId\":\"");
            if (!id || len == 0) continue;
            if (n == cap) objects = realloc(objects, (cap *= 2) * sizeof(resolvable));
            memcpy(objects[n].id, id + 12, 36);
            objects[n].id[36] = 0;
            objects[n].len = snprintf(NULL, 0, "{\"object\":%s}", line);
            objects[n].answer = malloc((size_t)objects[n].len + 1);
            snprintf(objects[n].answer, (size_t)objects[n].len + 1, "{\"object\":%s}", line);
            n++;
        }
        fclose(f);
        qsort(objects, n, sizeof(resolvable), cmp_resolvable);
        struct mosquitto *m = connect_coaty_client(id, host, port);
        mosquitto_message_callback_set(m, on_message_topic);
        subscribe_and_wait(m, "coaty/3/-/DSC/#");
        printf("ready\n");
        fflush(stdout);
        char topic[256];
        for (;;) {
            item *it = q_pop();
            // coaty/3/-/DSC/<sourceId>/<correlationId>; payload {"objectId":"…",…}
            const char *correlation = it->topic ? strrchr(it->topic, '/') : NULL;
            char *payload = malloc((size_t)it->len + 1);
            memcpy(payload, it->payload, (size_t)it->len);
            payload[it->len] = 0;
            const char *key = strstr(payload, "\"objectId\":\"");
            if (correlation && key && strlen(key) >= 12 + 36) {
                resolvable probe;
                memcpy(probe.id, key + 12, 36);
                probe.id[36] = 0;
                resolvable *hit = bsearch(&probe, objects, n, sizeof(resolvable), cmp_resolvable);
                if (hit) {
                    snprintf(topic, sizeof topic, "coaty/3/-/RSV/6f1c3e2a-9b4d-4c8e-8a1f-2d3e4c5b6a70%s", correlation);
                    mosquitto_publish(m, NULL, topic, hit->len, hit->answer, 0, false);
                }
            }
            free(payload);
            free(it->payload);
            free(it->topic);
            free(it);
        }
    }
    bool coaty = strcmp(argv[argc - 1], "--coaty") == 0;
    if (strcmp(role, "responder") == 0 && coaty) {
        struct mosquitto *m = connect_coaty_client(id, host, port);
        subscribe_and_wait(m, "bench/req");
        printf("ready\n");
        fflush(stdout);
        char topic[64], answer[64];
        for (;;) {
            item *it = q_pop();
            if (it->len == 4 && memcmp(it->payload, "stop", 4) == 0) return 0;
            snprintf(topic, sizeof topic, "bench/rsp/%.*s", it->len, it->payload);
            int len = snprintf(answer, sizeof answer, "r%.*s", it->len, it->payload);
            mosquitto_publish(m, NULL, topic, len, answer, 0, false);
            free(it->payload);
            free(it);
        }
    }
    if (strcmp(role, "requester") == 0 && coaty && argc >= 6) {
        long count = atol(argv[4]);
        struct mosquitto *m = connect_coaty_client(id, host, port);
        subscribe_and_wait(m, "bench/req");  // an agent receives its own requests
        uint64_t *samples = malloc(sizeof(uint64_t) * (size_t)count);
        char payload[64], topic[64];
        long warmup = count / 10;
        for (long i = -warmup; i < count; i++) {
            int len = snprintf(payload, sizeof payload, "%ld", i);
            snprintf(topic, sizeof topic, "bench/rsp/%ld", i);
            uint64_t start = now_ns();
            mosquitto_subscribe(m, NULL, topic, 0);
            mosquitto_publish(m, NULL, "bench/req", len, payload, 0, false);
            for (;;) {
                item *it = q_pop();
                bool response = it->len > 0 && it->payload[0] == 'r';
                if (response && (it->len != len + 1 || memcmp(it->payload + 1, payload, (size_t)len) != 0)) {
                    fprintf(stderr, "unexpected response\n");
                    return 1;
                }
                free(it->payload);
                free(it);
                if (response) break;
            }
            uint64_t end = now_ns();
            mosquitto_unsubscribe(m, NULL, topic);
            if (i >= 0) samples[i] = end - start;
        }
        finish_requests(m, samples, count);
        return 0;
    }
    if (strcmp(role, "responder") == 0) {
        struct mosquitto *m = connect_client(id, host, port);
        subscribe_and_wait(m, "bench/req");
        printf("ready\n");
        fflush(stdout);
        for (;;) {
            item *it = q_pop();
            if (it->len == 4 && memcmp(it->payload, "stop", 4) == 0) break;
            mosquitto_publish(m, NULL, "bench/rsp", it->len, it->payload, 0, false);
            free(it->payload);
            free(it);
        }
        mosquitto_disconnect(m);
        mosquitto_loop_stop(m, false);
        return 0;
    }
    if (strcmp(role, "requester") == 0 && argc >= 5) {
        long count = atol(argv[4]);
        struct mosquitto *m = connect_client(id, host, port);
        subscribe_and_wait(m, "bench/rsp");
        uint64_t *samples = malloc(sizeof(uint64_t) * (size_t)count);
        char payload[64];
        long warmup = count / 10;
        for (long i = -warmup; i < count; i++) {
            int len = snprintf(payload, sizeof payload, "%ld", i);
            uint64_t start = now_ns();
            mosquitto_publish(m, NULL, "bench/req", len, payload, 0, false);
            item *it = q_pop();
            uint64_t end = now_ns();
            if (it->len != len || memcmp(it->payload, payload, (size_t)len) != 0) {
                fprintf(stderr, "unexpected response\n");
                return 1;
            }
            free(it->payload);
            free(it);
            if (i >= 0) samples[i] = end - start;
        }
        finish_requests(m, samples, count);
        mosquitto_disconnect(m);
        mosquitto_loop_stop(m, false);
        return 0;
    }
    fprintf(stderr, "bad arguments\n");
    return 2;
}
