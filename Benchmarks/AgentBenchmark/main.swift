// agent-benchmark: CoatyKit agents (CommunicationManager over CoatyKit's MQTT transport) against
// the C libmosquitto baseline (mqtt-baseline), in the same run, against a broker this program
// starts with a pinned configuration.
//
//   Benchmarks/run agent [--json] [--messages N] [--round-trips N] [--runs K] [--memory-events N]
//                        [--nagle-round-trips N]
//   Benchmarks/run agent --instructions [--instruction-events N] [--instruction-round-trips N] [--instruction-baseline 0]
//
// (which builds `mqtt-baseline` and `agent-benchmark` with `swift build -c release` and runs
// `.build/release/agent-benchmark`). Scenarios, each side in its own processes like the baseline:
//   1. Advertise throughput with typed decode: one agent publishes N Advertise events of a
//      registered custom object type (`Reading`, a ~300-byte payload), another observes
//      `observeAdvertise(Reading.self)` and counts every typed event. Baseline: the C program's
//      raw QoS 0 throughput at the same payload size. Target ratio ≥ 0.8. A lost event fails the
//      run (buffers are sized for the run; drops would be reported with the failure). A second
//      row compares with the C program publishing each message on two topics (one observed),
//      the broker's work of a custom-type Advertise (ADV:CoatyObject and ADV::<objectType>);
//      a third row reports that C program against the raw one: the ceiling any protocol-
//      conformant implementation, C included, reaches against the raw baseline.
//   2. Discover→Resolve round trip: one agent resolves Discover-by-objectId, another discovers
//      sequentially with `.first(timeout:)`. Baseline: the C request/response round trip with
//      the application-thread hand-off. Target p50 ratio ≤ 1.5. Further rows compare with the C
//      program following Coaty's request pattern (fresh response subscription, own request
//      echoed, UNSUBSCRIBE) and report that program against the plain one: the protocol's ceiling. Against mosquitto's default
//      configuration, as users run it; a short run with the client's latency tuning switched off
//      (`MQTTConfiguration.tcpNoDelay = false`) shows what Nagle's algorithm and delayed ACKs cost.
//   3. Steady memory: the same Advertise flow for --memory-events events (default one million)
//      with the default buffers (as an application runs it); each side samples its own VmRSS
//      every 250 ms and reports start, peak, end and the slope after a 10 % warm-up. Drops in
//      the default buffers are counted and reported, not fatal.
// The throughput and round-trip scenarios run the baseline and ours alternately K times and
// report the medians. `--instructions` instead counts each side's user-space instructions and
// allocations per event and per request under callgrind (runs of N and 2N, the difference
// divided by N: start-up cancels out), repeatable to about 1 % where timings move ±15 %.
import BenchmarkSupport
import CoatyKit
import CoatyTesting
import Foundation
import Logging
import Synchronization

// MARK: - The object type

/// The custom object type the agents advertise, as an application declares it.
struct Reading: CoatyObject, Hashable {
    static let objectType = "com.example.bench.Reading"
    var objectId = CoatyUUID()
    var name = "Reading of sensor 17 in room B7-4.12"
    var sensorId = "3b5b8c6e-1f0a-4c1e-9a6f-0c7d2e4b8a11"
    var value = 21.375
    var unit = "°C"
    var sequence = 0
    var timestamp = 1_700_000_000_000
    var quality = "good"
    var room = "B7-4.12"
}

/// The size of one Advertise payload of the sample reading (what the manager publishes).
func advertisePayloadSize() throws -> Int {
    var sample = Reading()
    sample.sequence = 123_456
    return JSONValue.object(["object": .object(try AnyCoatyObject(sample).json)]).serializedBytes().count
}

// MARK: - Roles (CoatyKit side)

/// A started manager on the broker, with the defaults of `CommunicationManager.mqtt(...)` (buffers
/// included: back-pressure, nothing dropped); `tcpNoDelay: false` turns Nagle's algorithm on. With
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set, swift-otel traces and the manager speaks MQTT 5 (``BenchmarkTracing``);
/// `COATY_MQTT_VERSION=5` alone: MQTT 5 without a tracer.
func startManager(
    _ host: String,
    _ port: String,
    name: String,
    metrics: CountingMetrics,
    tcpNoDelay: Bool = true
) async throws -> CommunicationManager {
    let identity = Identity(name: name)
    let registry = CoatyObjectRegistry([Reading.self])
    let url = "mqtt://\(host):\(port)"
    let manager: CommunicationManager
    try BenchmarkTracing.startIfRequested(serviceName: "agent-benchmark \(name)")
    let mqtt5 = BenchmarkTracing.isOn || ProcessInfo.processInfo.environment["COATY_MQTT_VERSION"] == "5"
    if !tcpNoDelay || mqtt5 {
        var configuration = try MQTTConfiguration.coaty(url: url, identityId: identity.objectId)
        configuration.tcpNoDelay = tcpNoDelay
        if mqtt5 { configuration.protocolVersion = .v5 }
        manager = try CommunicationManager(
            transport: MQTTTransport(configuration: configuration, metricsFactory: metrics),
            identity: identity,
            registry: registry,
            metricsFactory: metrics
        )
    } else {
        manager = try CommunicationManager.mqtt(
            url: url,
            identity: identity,
            registry: registry,
            metricsFactory: metrics
        )
    }
    try await manager.start()
    return manager
}

/// `observe HOST PORT COUNT [--memory] [--executor] [--patient]`: counts typed Advertise events until COUNT
/// arrived or nothing arrived for 3 s (60 s with `--patient`).
func runObserver(_ args: [String]) async throws {
    let (host, port, count, memory) = (args[0], args[1], Int(args[2])!, args.contains("--memory"))
    let metrics = CountingMetrics()
    let manager = try await startManager(
        host,
        port,
        name: "observer",
        metrics: metrics
    )
    let observation = try manager.observeAdvertise(Reading.self)
    await observation.subscribed()
    let watchdog = ProgressWatchdog()
    let sampler = MemorySampler()
    if memory { sampler.start(every: .milliseconds(250)) { watchdog.progress } }
    emit("ready")
    let consumer = Task(executorPreference: args.contains("--executor") ? manager.deliveryExecutor : nil) {
        var received = 0
        var sequenceSum = 0
        var first: UInt64 = 0
        var last: UInt64 = 0
        for await event in observation {
            last = monotonicNanoseconds()
            if received == 0 { first = last }
            received += 1
            sequenceSum &+= event.object.sequence  // use the typed value
            if received & 255 == 0 { watchdog.report(received) }
            if received == count { break }
        }
        return (received, sequenceSum, first, last)
    }
    // Under callgrind (`--patient`) the publisher starts tens of times slower.
    watchdog.start(stallTimeout: args.contains("--patient") ? .seconds(60) : .seconds(3)) { consumer.cancel() }
    let (received, sequenceSum, first, last) = await consumer.value
    watchdog.stop()
    sampler.stop(items: received)
    let seconds = Double(last - first) / 1e9
    var result: JSONObject = [
        "received": .int(Int64(received)),
        "seconds": .double(seconds),
        "perSecond": .double(Double(received - 1) / seconds),
        "sequenceSum": .int(Int64(sequenceSum)),
        "observerOverflow": .int(Int64(manager.statistics.observerOverflow)),
        "mqttDropped": .int(Int64(metrics.total("coaty_mqtt_dropped_messages_total"))),
        "invalidPayloads": .int(Int64(manager.statistics.invalidPayloads)),
    ]
    if memory { result["memory"] = .object(sampler.summary()) }
    emit(result)
    await manager.stop()
    await BenchmarkTracing.finish()
}

/// `advertise HOST PORT COUNT [--memory]`: publishes COUNT Advertise events of a reading whose
/// sequence number counts up, and when its standard input ends (the observer is done) prints its
/// result and disconnects.
func runAdvertiser(_ args: [String]) async throws {
    let (host, port, count, memory) = (args[0], args[1], Int(args[2])!, args.contains("--memory"))
    let manager = try await startManager(
        host,
        port,
        name: "advertiser",
        metrics: CountingMetrics()
    )
    let watchdog = ProgressWatchdog()
    let sampler = MemorySampler()
    if memory { sampler.start(every: .milliseconds(250)) { watchdog.progress } }
    var reading = Reading()
    for i in 0..<count {
        reading.sequence = i
        try await manager.publishAdvertise(reading)
        if i & 255 == 0 { watchdog.report(i) }
    }
    // Stay connected until the driver has the observer's result: QoS 0 events still queued
    // in this client must not be cut off by the disconnect.
    waitForEndOfInput()
    sampler.stop(items: count)
    var result: JSONObject = ["published": .int(Int64(count))]
    if memory { result["memory"] = .object(sampler.summary()) }
    emit(result)
    let stopping = monotonicNanoseconds()
    await manager.stop()
    await BenchmarkTracing.finish()
    let stopSeconds = Double(monotonicNanoseconds() - stopping) / 1e9
    if stopSeconds > 1 { FileHandle.standardError.write(Data("advertiser: stop took \(stopSeconds) s\n".utf8)) }
}

/// `resolver HOST PORT [--nagle] [--executor] [--answers N]`: answers every Discover by objectId with a reading
/// of that id (ends after N answers with `--answers`) (`--nagle`: without TCP_NODELAY; `--executor`: on the manager's delivery executor).
func runResolver(_ args: [String]) async throws {
    let manager = try await startManager(
        args[0],
        args[1],
        name: "resolver",
        metrics: CountingMetrics(),
        tcpNoDelay: !args.contains("--nagle")
    )
    let discovers = try manager.observeDiscover()
    await discovers.subscribed()
    emit("ready")
    try await withTaskExecutorPreference(args.contains("--executor") ? manager.deliveryExecutor : nil) {
        var reading = Reading()
        // `--answers N`: ends after N answers (a counted responder ends on its own; callgrind writes its counts at exit).
        let limit = args.firstIndex(of: "--answers").flatMap { Int(args[$0 + 1]) }
        var answered = 0
        for await discover in discovers {
            guard let objectId = discover.data.objectId else { continue }
            reading.objectId = objectId
            try await discover.resolve(object: reading)
            answered += 1
            if answered == limit { break }
        }
    }
    await BenchmarkTracing.finish()
}

/// `discoverer HOST PORT COUNT [--nagle] [--executor]`: COUNT sequential Discover→Resolve round
/// trips (after COUNT/10 warm-up ones), each `publishDiscover(.objectId(id)).first(timeout:)`
/// (`--nagle`: without TCP_NODELAY; `--executor`: on the manager's delivery executor).
func runDiscoverer(_ args: [String]) async throws {
    let count = Int(args[2])!
    let manager = try await startManager(
        args[0],
        args[1],
        name: "discoverer",
        metrics: CountingMetrics(),
        tcpNoDelay: !args.contains("--nagle")
    )
    let samples = try await withTaskExecutorPreference(args.contains("--executor") ? manager.deliveryExecutor : nil) {
        var samples: [UInt64] = []
        samples.reserveCapacity(count)
        for i in -(count / 10)..<count {
            let id = CoatyUUID()
            let start = monotonicNanoseconds()
            guard let resolve = try await manager.publishDiscover(.objectId(id)).first(timeout: .seconds(5)) else {
                throw BenchmarkError("no Resolve within 5 s for Discover \(i)")
            }
            let end = monotonicNanoseconds()
            guard resolve.data.object?.objectId == id else { throw BenchmarkError("a Resolve for another object") }
            if i >= 0 { samples.append(end - start) }
        }
        return samples
    }
    emit(LatencyPercentiles(nanoseconds: samples).json(count: count))
    await manager.stop()
    await BenchmarkTracing.finish()
}

/// `discover-loop HOST PORT ROUNDS WARMUP OBJECT-ID` and `query-loop HOST PORT ROUNDS WARMUP OBJECT-TYPE FILTER`:
/// a CoatyKit requester's sequential round trips against whatever answers (a Coaty JS responder,
/// `coaty record`), each timed from publishing to the first response; prints
/// `{"p50_us":…,"p99_us":…,"mean_us":…,"rounds":…}` as Coaty JS's `agent.js discover-loop` does
/// (`--executor`: the loop runs on the manager's delivery executor).
func runRequestLoop(_ args: [String], query: Bool) async throws {
    let (rounds, warmup) = (Int(args[2])!, Int(args[3])!)
    let manager = try await startManager(args[0], args[1], name: "requester", metrics: CountingMetrics())
    var filter: ObjectFilter?
    if query { filter = try JSONValueDecoder().decode(ObjectFilter.self, from: args[5]) }
    let executor = args.contains("--executor") ? manager.deliveryExecutor : nil
    let samples = try await withTaskExecutorPreference(executor) {
        try await requestSamples(manager, args, query: query, filter: filter, rounds: rounds, warmup: warmup)
    }
    let percentiles = LatencyPercentiles(nanoseconds: samples)
    let mean = Double(samples.reduce(0, +)) / Double(samples.count) / 1000
    emit([
        "rounds": .int(Int64(rounds)), "p50_us": .double(percentiles.p50), "p99_us": .double(percentiles.p99),
        "mean_us": .double(mean),
    ])
    await manager.stop()
}

/// The timed round trips of ``runRequestLoop(_:query:)``.
func requestSamples(
    _ manager: CommunicationManager,
    _ args: [String],
    query: Bool,
    filter: ObjectFilter?,
    rounds: Int,
    warmup: Int
) async throws -> [UInt64] {
    var samples: [UInt64] = []
    samples.reserveCapacity(rounds)
    for i in -warmup..<rounds {
        let start = monotonicNanoseconds()
        if query {
            let data = QueryEventData(objectTypes: [args[4]], objectFilter: filter)
            guard try await manager.publishQuery(data).first(timeout: .seconds(10)) != nil else {
                throw BenchmarkError("no Retrieve within 10 s for Query \(i)")
            }
        } else {
            guard let id = CoatyUUID(args[4]) else { throw BenchmarkError("not a UUID: \(args[4])") }
            guard try await manager.publishDiscover(.objectId(id)).first(timeout: .seconds(10)) != nil else {
                throw BenchmarkError("no Resolve within 10 s for Discover \(i)")
            }
        }
        if i >= 0 { samples.append(monotonicNanoseconds() - start) }
    }
    return samples
}

// MARK: - Soak load (Benchmarks/Soak/run.py drives it)

/// The figures of one soak window: what was sent, and the round trips' latencies.
struct SoakWindow: Sendable {
    var advertised = 0
    var discoverSamples: [UInt64] = []
    var querySamples: [UInt64] = []
    var unanswered = 0
}

/// The soak load's shared window, a class so that the load's tasks share one lock.
final class SoakState: Sendable {
    let window = Mutex(SoakWindow())
}

/// `soak-load HOST PORT SECONDS ADVERTISE-RATE REQUEST-RATE`: a steady mixed load for SECONDS against
/// whatever records and answers (`coaty record`): ADVERTISE-RATE Advertise events per second over 1000 object ids,
/// and REQUEST-RATE Discover-by-objectId and REQUEST-RATE Query round trips per second, each awaited with a 5 s
/// timeout. Every 10 s it prints the window as a JSON line: `{"t":…,"advertised":…,"discoverP50":…,
/// "discoverP99":…,"queryP50":…,"queryP99":…,"unanswered":…}` (latencies in µs).
func runSoakLoad(_ args: [String]) async throws {
    let (seconds, advertiseRate, requestRate) = (Int(args[2])!, Int(args[3])!, Int(args[4])!)
    let manager = try await startManager(args[0], args[1], name: "soak-load", metrics: CountingMetrics())
    let ids = (0..<1000).map { _ in CoatyUUID() }
    let state = SoakState()
    let start = ContinuousClock.now
    let end = start + .seconds(seconds)
    /// Runs `body` `rate` times per second (in 10 ms ticks) until the end.
    @Sendable func paced(_ rate: Int, _ body: @escaping @Sendable (Int) async throws -> Void) async throws {
        var done = 0
        while ContinuousClock.now < end {
            let elapsed: Double = (ContinuousClock.now - start) / Duration.seconds(1)
            let due = Int(Double(rate) * elapsed)
            while done < due {
                try await body(done)
                done += 1
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
    @Sendable func timed(_ request: () async throws -> Bool) async rethrows -> UInt64? {
        let began = monotonicNanoseconds()
        guard try await request() else { return nil }
        return monotonicNanoseconds() - began
    }
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            try await paced(advertiseRate) { n in
                var reading = Reading()
                reading.objectId = ids[n % ids.count]
                reading.sequence = n
                try await manager.publishAdvertise(reading)
                state.window.withLock { $0.advertised += 1 }
            }
        }
        group.addTask {
            try await paced(requestRate) { n in
                let sample = try await timed {
                    try await manager.publishDiscover(.objectId(ids[n % ids.count])).first(timeout: .seconds(5)) != nil
                }
                state.window.withLock {
                    if let sample { $0.discoverSamples.append(sample) } else { $0.unanswered += 1 }
                }
            }
        }
        group.addTask {
            let filter = try JSONValueDecoder().decode(
                ObjectFilter.self,
                from: #"{"orderByProperties":[["sequence","Desc"]],"take":10}"#
            )
            try await paced(requestRate) { _ in
                let data = QueryEventData(objectTypes: [Reading.objectType], objectFilter: filter)
                let sample = try await timed { try await manager.publishQuery(data).first(timeout: .seconds(5)) != nil }
                state.window.withLock { if let sample { $0.querySamples.append(sample) } else { $0.unanswered += 1 } }
            }
        }
        group.addTask {
            while ContinuousClock.now < end {
                try await Task.sleep(for: .seconds(10))
                let figures = state.window.withLock { window in
                    defer { window = SoakWindow() }
                    return window
                }
                func percentiles(_ samples: [UInt64]) -> (JSONValue, JSONValue) {
                    guard !samples.isEmpty else { return (.null, .null) }
                    let p = LatencyPercentiles(nanoseconds: samples)
                    return (.double(p.p50), .double(p.p99))
                }
                let (discoverP50, discoverP99) = percentiles(figures.discoverSamples)
                let (queryP50, queryP99) = percentiles(figures.querySamples)
                let t: Double = (ContinuousClock.now - start) / Duration.seconds(1)
                emit([
                    "t": .double(t), "advertised": .int(Int64(figures.advertised)),
                    "discoverP50": discoverP50, "discoverP99": discoverP99, "queryP50": queryP50, "queryP99": queryP99,
                    "unanswered": .int(Int64(figures.unanswered)),
                ])
            }
        }
        try await group.waitForAll()
    }
    await manager.stop()
}

// MARK: - Driver

let host = "127.0.0.1"

func drive(_ options: BenchmarkOptions) async throws {
    let baseline = try siblingExecutable("mqtt-baseline")
    let ours = currentExecutable
    let size = try advertisePayloadSize()
    if options.instructions {
        try await driveInstructions(options, baseline: baseline, ours: ours, size: size)
        return
    }
    let (runs, roundTrips) = (options["--runs"], options["--round-trips"])
    // Everything runs against the pinned broker (CoatyTesting's MosquittoBroker, with
    // `set_tcp_nodelay true`). On mosquitto's default configuration Nagle's algorithm is on at the
    // broker, which holds the SUBACK of a request written right after the UNSUBACK of the last one
    // until the client acknowledged the UNSUBACK: the client's TCP_QUICKACK (`MQTTConfiguration.tcpNoDelay`)
    // is what keeps a round trip there at ~0.2 ms instead of ~44 ms (Benchmarks/README.md). A short
    // run with the client's tuning switched off shows what its own Nagle costs.
    let (throughput, memory, roundTrip, nagle) = try await withBroker { broker in
        let port = String(broker.port)
        return (
            try measureThroughput(
                options,
                baseline: baseline,
                ours: ours,
                port: port,
                brokerPID: broker.processIdentifier,
                size: size
            ),
            try measureMemory(events: options["--memory-events"], ours: ours, port: port),
            try measureRoundTrips(
                runs: runs,
                count: roundTrips,
                baseline: baseline,
                ours: ours,
                port: port,
                executorToo: true
            ),
            try measureRoundTrips(
                runs: 1,
                count: options["--nagle-round-trips"],
                baseline: baseline,
                ours: ours,
                port: port,
                oursExtra: ["--nagle"]
            )
        )
    }
    let messages = options["--messages"]
    BenchmarkReport(
        title:
            "CoatyKit agents vs C libmosquitto baseline (median of \(runs) runs, \(messages) Advertise events of "
            + "\(size) B, \(roundTrips) round trips; memory over \(options["--memory-events"]) events)",
        baselineHeader: "baseline (C)",
        parameters: options.parameters.merging(["payloadBytes": .int(Int64(size))]),
        // The targets (DESIGN.md) are against "a C program on libmosquitto doing the same messaging
        // without decoding": C publishing each event on the two topics of a custom-type Advertise,
        // and C following Coaty's request pattern. The rows against C doing less (one topic, a fixed
        // response topic) show what the protocol itself costs.
        rows: [
            BenchmarkRow(
                "Advertise throughput, typed decode at the observer (events/s; C: the same messaging, each event on the"
                    + " two topics of a custom-type Advertise, one observed)",
                better: .higher,
                ours: median(throughput.ours),
                baseline: median(throughput.baselineTwoTopics),
                target: 0.8
            ),
            BenchmarkRow(
                "Advertise throughput, observer loop on the manager's deliveryExecutor (events/s; C: the same"
                    + " messaging)",
                better: .higher,
                ours: median(throughput.oursOnExecutor),
                baseline: median(throughput.baselineTwoTopics),
                target: 0.8
            ),
            BenchmarkRow(
                "Advertise throughput vs C publishing each event once (events/s; C: raw \(size) B QoS 0 msg/s)",
                better: .higher,
                ours: median(throughput.ours),
                baseline: median(throughput.baseline)
            ),
            // The protocol's second publication costs the broker as much as the first: what C
            // itself reaches doing an Advertise's wire work, against C publishing once.
            BenchmarkRow(
                "Ceiling: the C program itself publishing on two topics as Advertise does (msg/s; C: raw)",
                better: .higher,
                ours: median(throughput.baselineTwoTopics),
                baseline: median(throughput.baseline)
            ),
            // Three processes on the benchmark machine's cores: where they are all busy, throughput is
            // set by the CPU all of them spend per event, a figure much steadier from run to run.
            BenchmarkRow(
                "CPU per event, subscriber + publisher + broker (µs, user + system; C: two topics)",
                better: .lower,
                ours: median(throughput.cpuOurs.total),
                baseline: median(throughput.cpuTwoTopics.total)
            ),
            BenchmarkRow(
                "CPU per event, subscriber + publisher processes, start-up included (µs; C: two topics)",
                better: .lower,
                ours: median(throughput.cpuOurs.clients),
                baseline: median(throughput.cpuTwoTopics.clients)
            ),
            BenchmarkRow(
                "CPU per event, broker (µs; C: two topics)",
                better: .lower,
                ours: median(throughput.cpuOurs.broker),
                baseline: median(throughput.cpuTwoTopics.broker)
            ),
            BenchmarkRow(
                "Discover→Resolve round trip p50 (µs; C: the same messaging, following Coaty's request pattern)",
                better: .lower,
                ours: median(roundTrip.ours.p50),
                baseline: median(roundTrip.coatyPattern.p50),
                target: 1.5
            ),
            BenchmarkRow(
                "Discover→Resolve round trip p99 (µs; C: Coaty's request pattern)",
                better: .lower,
                ours: median(roundTrip.ours.p99),
                baseline: median(roundTrip.coatyPattern.p99)
            ),
            BenchmarkRow(
                "Discover→Resolve round trip p50 (µs; both agents' loops on their manager's deliveryExecutor;"
                    + " C: Coaty's request pattern)",
                better: .lower,
                ours: median(roundTrip.executor.p50),
                baseline: median(roundTrip.coatyPattern.p50),
                target: 1.5
            ),
            BenchmarkRow(
                "Discover→Resolve round trip p99 (µs; on the deliveryExecutor; C: Coaty's request pattern)",
                better: .lower,
                ours: median(roundTrip.executor.p99),
                baseline: median(roundTrip.coatyPattern.p99)
            ),
            BenchmarkRow(
                "Discover→Resolve round trip p50 vs plain request/response (µs; C: fixed topics, hand-off to an"
                    + " application thread; mosquitto default config)",
                better: .lower,
                ours: median(roundTrip.ours.p50),
                baseline: median(roundTrip.baseline.p50)
            ),
            BenchmarkRow(
                "Discover→Resolve round trip p50 vs plain request/response, on the deliveryExecutor (µs)",
                better: .lower,
                ours: median(roundTrip.executor.p50),
                baseline: median(roundTrip.baseline.p50)
            ),
            BenchmarkRow(
                "Discover→Resolve round trip p99 vs plain request/response (µs)",
                better: .lower,
                ours: median(roundTrip.ours.p99),
                baseline: median(roundTrip.baseline.p99)
            ),
            // The request protocol's own cost: what C itself reaches following it, against plain C.
            BenchmarkRow(
                "Ceiling: the C program itself following Coaty's request pattern, p50 (µs; C: request/response)",
                better: .lower,
                ours: median(roundTrip.coatyPattern.p50),
                baseline: median(roundTrip.baseline.p50)
            ),
            BenchmarkRow(
                "Discover→Resolve round trip p50 (µs; client tcpNoDelay = false, Nagle on; \(options["--nagle-round-trips"]) round trips)",
                better: .lower,
                ours: median(nagle.ours.p50),
                baseline: median(nagle.baseline.p50)
            ),
        ] + memory.rows,
        details: [
            "throughput events received/sent (ours per run: default, then observer on the deliveryExecutor)": .string(
                throughput.receivedOfSent.joined(separator: ", ")
            ),
            "memory run events": .string(memory.events),
        ],
        notes: [
            "throughput: every one of the \(messages) events arrived and decoded into a Reading in every run (checked:"
                + " count and the sum of sequence numbers); a custom-type Advertise is two MQTT publications"
                + " (ADV:CoatyObject and ADV::\(Reading.objectType)), the observer subscribes to one. deliveryExecutor:"
                + " the observer's `for await` loop runs in a task that prefers the manager's deliveryExecutor, so it"
                + " takes each batch on the thread that decoded it instead of being woken on another.",
            "round trip: each Discover subscribes a fresh response topic, publishes right behind the SUBSCRIBE"
                + " (no wait for the SUBACK), and unsubscribes after the Resolve (Coaty's request protocol); the plain"
                + " C request/response publishes on a fixed topic and waits. deliveryExecutor: the resolver's observe loop and"
                + " the discoverer's request loop run in `withTaskExecutorPreference(manager.deliveryExecutor)`, on the"
                + " thread that routes received events, as the C baseline's application thread takes each message."
                + " C following Coaty's request pattern (mqtt-baseline --coaty): a fresh response subscription per"
                + " request without waiting for the SUBACK, the echo of the own request received, an UNSUBSCRIBE"
                + " after the response, TCP_NODELAY and TCP_QUICKACK as CoatyMQTT sets them; no JSON.",
        ]
    ).print(json: options.json)
}

/// Events (messages) per second of the throughput runs.
struct ThroughputRuns {
    var ours: [Double] = []
    /// Ours with the observer's loop on the manager's `deliveryExecutor`.
    var oursOnExecutor: [Double] = []
    var baseline: [Double] = []
    /// The C baseline publishing every message also on a second, unobserved topic (the broker's
    /// work of a custom-type Advertise).
    var baselineTwoTopics: [Double] = []
    var receivedOfSent: [String] = []
    /// CPU µs per event of the runs of `ours` and of `baselineTwoTopics`.
    var cpuOurs = CPUPerEvent()
    var cpuTwoTopics = CPUPerEvent()
}

/// CPU µs per event, user plus system, of throughput runs: the two client processes (from their
/// start to their exit) and the broker (during the run).
struct CPUPerEvent {
    var clients: [Double] = []
    var broker: [Double] = []

    var total: [Double] { zip(clients, broker).map { $0 + $1 } }

    /// Runs `body` (one throughput run of `events` events) and records the CPU it took.
    mutating func measure<T>(events: Int, broker pid: Int32?, _ body: () throws -> T) rethrows -> T {
        let (clients0, broker0) = (CPUTime.ofWaitedChildren, pid.map(CPUTime.ofProcess) ?? .nan)
        let result = try body()
        let (clients1, broker1) = (CPUTime.ofWaitedChildren, pid.map(CPUTime.ofProcess) ?? .nan)
        clients.append((clients1 - clients0) * 1e6 / Double(events))
        broker.append((broker1 - broker0) * 1e6 / Double(events))
        return result
    }
}

/// Throughput runs, the baseline and ours alternately; events (messages) per second.
func measureThroughput(
    _ options: BenchmarkOptions,
    baseline: URL,
    ours: URL,
    port: String,
    brokerPID: Int32?,
    size: Int
) throws -> ThroughputRuns {
    let messages = options["--messages"]
    var result = ThroughputRuns()
    for run in 0..<options["--runs"] {
        let topic = "bench/throughput/\(run)"
        let c = try runThroughput(
            subscriber: Role(baseline, ["sub", host, port, topic, String(messages)]),
            publisher: Role(baseline, ["pub", host, port, topic, String(messages), String(size)]),
            expected: messages
        )
        result.baseline.append(c.number("perSecond"))
        let twoTopics = try result.cpuTwoTopics.measure(events: messages, broker: brokerPID) {
            try runThroughput(
                subscriber: Role(baseline, ["sub", host, port, topic, String(messages)]),
                publisher: Role(
                    baseline,
                    ["pub", host, port, topic, String(messages), String(size), topic + "/unobserved"]
                ),
                expected: messages
            )
        }
        result.baselineTwoTopics.append(twoTopics.number("perSecond"))
        for onExecutor in [false, true] {
            let run = {
                try runThroughput(
                    subscriber: Role(
                        ours,
                        ["observe", host, port, String(messages)] + (onExecutor ? ["--executor"] : [])
                    ),
                    publisher: Role(ours, ["advertise", host, port, String(messages)]),
                    expected: messages
                )
            }
            let agent = onExecutor ? try run() : try result.cpuOurs.measure(events: messages, broker: brokerPID, run)
            // Every event was decoded into a Reading: the sum of their sequence numbers is 0+1+…+(N-1).
            guard agent.integer("sequenceSum") == messages * (messages - 1) / 2 else {
                throw BenchmarkError("the observed readings are not the advertised ones: \(agent)")
            }
            if onExecutor {
                result.oursOnExecutor.append(agent.number("perSecond"))
            } else {
                result.ours.append(agent.number("perSecond"))
            }
            result.receivedOfSent.append("\(agent.integer("received"))/\(messages)")
        }
    }
    return result
}

/// The p50s and p99s (µs) of round-trip runs.
struct RoundTripRuns {
    var p50: [Double] = []
    var p99: [Double] = []

    mutating func append(_ result: JSONObject) {
        p50.append(result.number("p50"))
        p99.append(result.number("p99"))
    }
}

/// Round-trip runs, the baseline and ours alternately.
func measureRoundTrips(
    runs: Int,
    count: Int,
    baseline: URL,
    ours: URL,
    port: String,
    oursExtra: [String] = [],
    executorToo: Bool = false
) throws -> (ours: RoundTripRuns, baseline: RoundTripRuns, executor: RoundTripRuns, coatyPattern: RoundTripRuns) {
    var result = (
        ours: RoundTripRuns(),
        baseline: RoundTripRuns(),
        executor: RoundTripRuns(),
        coatyPattern: RoundTripRuns()
    )
    for _ in 0..<runs {
        result.baseline.append(
            try runRoundTrips(
                responder: Role(baseline, ["responder", host, port]),
                requester: Role(baseline, ["requester", host, port, String(count)])
            )
        )
        result.ours.append(
            try runRoundTrips(
                responder: Role(ours, ["resolver", host, port] + oursExtra),
                requester: Role(ours, ["discoverer", host, port, String(count)] + oursExtra),
                terminateResponder: true
            )
        )
        guard executorToo else { continue }
        result.coatyPattern.append(
            try runRoundTrips(
                responder: Role(baseline, ["responder", host, port, "--coaty"]),
                requester: Role(baseline, ["requester", host, port, String(count), "--coaty"])
            )
        )
        result.executor.append(
            try runRoundTrips(
                responder: Role(ours, ["resolver", host, port, "--executor"] + oursExtra),
                requester: Role(ours, ["discoverer", host, port, String(count), "--executor"] + oursExtra),
                terminateResponder: true
            )
        )
    }
    return result
}

// MARK: - Instructions

/// `--instructions`: each side's instructions and allocations per event and per request, ours and C's,
/// counted by callgrind on short runs (``InstructionCount/perUnit(units:done:_:)``); the other side runs
/// natively.
func driveInstructions(_ options: BenchmarkOptions, baseline: URL, ours: URL, size: Int) async throws {
    let (events, roundTrips) = (options["--instruction-events"], options["--instruction-round-trips"])
    defer { InstructionCount.removeCopies() }
    let rows = try await withBroker { broker in
        let port = String(broker.port)
        func countEvents(_ counted: String, _ subscriber: @escaping (Int, String) -> Role, _ publisher: @escaping (Int, String) -> Role)
            throws -> InstructionCount
        {
            try InstructionCount.perUnit(units: events) { n, file in
                let topic = "bench/instructions/\(UUID().uuidString)"
                var (sub, pub) = (subscriber(n, topic), publisher(n, topic))
                if counted == "subscriber" { sub = try InstructionCount.counting(sub, into: file) }
                if counted == "publisher" { pub = try InstructionCount.counting(pub, into: file) }
                _ = try runThroughput(subscriber: sub, publisher: pub, expected: n)
            }
        }
        let cSubscriber = { (n: Int, topic: String) in Role(baseline, ["sub", host, port, topic, String(n)]) }
        let cPublisher = { (n: Int, topic: String) in
            Role(baseline, ["pub", host, port, topic, String(n), String(size), topic + "/unobserved"])
        }
        let ourObserver = { (n: Int, _: String) in Role(ours, ["observe", host, port, String(n), "--patient"]) }
        let ourAdvertiser = { (n: Int, _: String) in Role(ours, ["advertise", host, port, String(n)]) }
        func countRoundTrips(_ counted: String, responder: @escaping (Int) -> Role, requester: @escaping (Int) -> Role)
            throws -> InstructionCount
        {
            // Each requester makes COUNT round trips after COUNT/10 warm-up ones; the responder ends after as many.
            try InstructionCount.perUnit(units: roundTrips, done: { $0 + $0 / 10 }) { n, file in
                var (answering, asking) = (responder(n + n / 10), requester(n))
                if counted == "responder" { answering = try InstructionCount.counting(answering, into: file) }
                if counted == "requester" { asking = try InstructionCount.counting(asking, into: file) }
                _ = try runRoundTrips(responder: answering, requester: asking)
            }
        }
        // The C responder ends on the requester's "stop" message.
        let cResponder = { (_: Int) in Role(baseline, ["responder", host, port, "--coaty"]) }
        let cRequester = { (n: Int) in Role(baseline, ["requester", host, port, String(n), "--coaty"]) }
        let ourResponder = { (n: Int) in Role(ours, ["resolver", host, port, "--answers", String(n)]) }
        let ourRequester = { (n: Int) in Role(ours, ["discoverer", host, port, String(n)]) }
        // `--instruction-baseline 0`: our sides only (e.g. to compare configurations of ours).
        let withC = options["--instruction-baseline"] != 0
        func c(_ count: () throws -> InstructionCount) rethrows -> InstructionCount? { withC ? try count() : nil }
        let measured: [(String, InstructionCount, InstructionCount?)] = [
            // Each side's pair is its own (an observer needs Coaty payloads, the C subscriber counts raw ones).
            (
                "Advertise observer, typed decode (per event; C: subscriber of the same messaging)",
                try countEvents("subscriber", ourObserver, ourAdvertiser),
                try c { try countEvents("subscriber", cSubscriber, cPublisher) }
            ),
            (
                "Advertise publisher (per event; C: each event on the two topics of a custom-type Advertise)",
                try countEvents("publisher", ourObserver, ourAdvertiser),
                try c { try countEvents("publisher", cSubscriber, cPublisher) }
            ),
            (
                "Discover responder (per request; C: Coaty's request pattern)",
                try countRoundTrips("responder", responder: ourResponder, requester: ourRequester),
                try c { try countRoundTrips("responder", responder: cResponder, requester: cRequester) }
            ),
            (
                "Discover requester (per request; C: Coaty's request pattern)",
                try countRoundTrips("requester", responder: ourResponder, requester: ourRequester),
                try c { try countRoundTrips("requester", responder: cResponder, requester: cRequester) }
            ),
        ]
        return measured.flatMap { scenario, ours, c in
            [
                BenchmarkRow("\(scenario), instructions", better: .lower, ours: ours.instructions, baseline: c?.instructions, decimals: 0),
                BenchmarkRow("\(scenario), allocations", better: .lower, ours: ours.allocations, baseline: c?.allocations),
            ]
        }
    }
    BenchmarkReport(
        title:
            "CoatyKit agents vs C libmosquitto baseline: user-space instructions and allocations per unit, callgrind "
            + "(runs of \(events) and \(2 * events) events, \(roundTrips) and \(2 * roundTrips) round trips; the difference)",
        baselineHeader: "baseline (C)",
        parameters: options.parameters.merging(["payloadBytes": .int(Int64(size))]),
        rows: rows,
        notes: [
            "Counted: the named side under valgrind --tool=callgrind, all its threads; the other side and the broker run "
                + "natively. The kernel's work (system calls, TCP) is not counted: read these beside the time ratios."
        ]
    ).print(json: options.json)
}

/// Steady memory: one long run with the default buffers; drops are counted, not fatal.
func measureMemory(events: Int, ours: URL, port: String) throws -> (rows: [BenchmarkRow], events: String) {
    let observer = try Child(ours, ["observe", host, port, String(events), "--memory"])
    try observer.expectReady()
    let advertiser = try Child(ours, ["advertise", host, port, String(events), "--memory"])
    let observed = try observer.readJSON()
    advertiser.closeInput()
    let published = try advertiser.readJSON()
    advertiser.wait()
    observer.wait()
    let received = observed.integer("received")
    let counted = observed.integer("observerOverflow") + observed.integer("mqttDropped")
    let unaccounted = events - received - counted
    guard published.integer("published") == events, unaccounted <= 0 else {
        throw BenchmarkError(
            "memory run: received \(received) of \(events), \(counted) drops counted, "
                + "\(unaccounted) lost without a count: \(observed)"
        )
    }
    func rows(_ side: String, _ summary: JSONObject?) throws -> [BenchmarkRow] {
        guard let summary, summary["endKB"] != nil else {
            throw BenchmarkError("the \(side) took no memory samples (is /proc/self/status readable?)")
        }
        let figures = [("start", "startKB"), ("peak", "peakKB"), ("end", "endKB")].map { label, key in
            BenchmarkRow(
                "memory \(side): RSS \(label) (KiB)",
                better: .lower,
                ours: summary.number(key),
                baseline: nil,
                decimals: 0
            )
        }
        return figures + [
            BenchmarkRow(
                "memory \(side): RSS slope after 10 % warm-up (KiB per million events)",
                better: .lower,
                ours: summary.number("slopeKBPerMillion"),
                baseline: nil
            )
        ]
    }
    return (
        try rows("observer", observed["memory"]?.objectValue) + rows("advertiser", published["memory"]?.objectValue),
        "published \(events), received \(received), dropped in the MQTT client buffer "
            + "\(observed.integer("mqttDropped")), dropped in the observer buffer "
            + "\(observed.integer("observerOverflow")) (default buffers: back-pressure, nothing dropped)"
    )
}

extension JSONObject {
    /// This object with `other`'s members added (replacing equal keys).
    func merging(_ other: JSONObject) -> JSONObject {
        var merged = self
        for (key, value) in other { merged[key] = value }
        return merged
    }
}

// Blocking the main thread (not the async main loop): the roles also run under valgrind (--instructions).
benchmarkMainBlocking(
    "agent-benchmark",
    roles: [
        "observe": runObserver, "advertise": runAdvertiser, "resolver": runResolver, "discoverer": runDiscoverer,
        "discover-loop": { try await runRequestLoop($0, query: false) },
        "query-loop": { try await runRequestLoop($0, query: true) },
        "soak-load": runSoakLoad,
        "recorder": runRecorderRole,
    ],
    defaults: [
        "--messages": 200_000, "--round-trips": 10_000, "--runs": 3, "--memory-events": 1_000_000,
        "--nagle-round-trips": 300, "--instruction-events": 4_000, "--instruction-round-trips": 200,
        "--instruction-baseline": 1,
    ],
    driver: drive
)
