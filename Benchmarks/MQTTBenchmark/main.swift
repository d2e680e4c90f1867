// mqtt-benchmark: CoatyMQTT against the C libmosquitto baseline, in the same run, against a
// broker this program starts with a pinned configuration.
//
//   Benchmarks/run mqtt [--json] [--messages N] [--round-trips N] [--runs K] [--size BYTES] [--shim-variants 1]
//
// (which builds `mqtt-baseline` and `mqtt-benchmark` with `swift build -c release` and runs
// `.build/release/mqtt-benchmark`). Each scenario runs the baseline and ours alternately K times
// and reports the median of each and their ratio. Roles (`sub`, `pub`, `responder`, `requester`)
// are the same command line as mqtt-baseline's, so the driver runs both sides identically.
// `--shim-variants 1` also runs ours with each of the C shim's tricks switched off (COATY_SHIM_DISABLE), in the
// same runs, and adds the CPU time of publisher plus subscriber per message.
import BenchmarkSupport
import CoatyCore
import CoatyMQTT
import CoatyTesting
import Foundation
import Logging

// MARK: - Roles (CoatyMQTT side)

func clientConfiguration(_ host: String, _ port: String, _ role: String) throws -> MQTTConfiguration {
    // The defaults a user gets: a consumer behind by the receive buffer's capacity holds the reads
    // (back-pressure), nothing is dropped; a drop would still be counted and reported.
    try MQTTConfiguration(url: "mqtt://\(host):\(port)", clientId: "bench-\(role)-\(getpid())")
}

func makeClient(_ configuration: MQTTConfiguration) -> MQTTClient {
    var logger = Logger(label: "mqtt-benchmark")
    logger.logLevel = .warning
    return MQTTClient(configuration: configuration, logger: logger)
}

func runSubscriber(_ args: [String]) async throws {
    let (host, port, topic, count) = (args[0], args[1], args[2], Int(args[3])!)
    let client = makeClient(try clientConfiguration(host, port, "sub"))
    try await client.connect()
    try await client.subscribe(topic)
    emit("ready")
    var received = 0
    var bytes = 0
    var first: UInt64 = 0
    var last: UInt64 = 0
    let watchdog = ProgressWatchdog()
    watchdog.start { await client.disconnect() }
    for try await message in client.messages {
        last = monotonicNanoseconds()
        if received == 0 { first = last }
        received += 1
        bytes += message.payload.count
        if received & 1023 == 0 { watchdog.report(received) }
        if received == count { break }
    }
    watchdog.stop()
    let seconds = Double(last - first) / 1e9
    emit([
        "received": .int(Int64(received)), "bytes": .int(Int64(bytes)), "seconds": .double(seconds),
        "perSecond": .double(Double(received - 1) / seconds), "dropped": .int(Int64(client.droppedMessageCount)),
    ])
    await client.disconnect()
}

func runPublisher(_ args: [String]) async throws {
    let (host, port, topic, count, size) = (args[0], args[1], args[2], Int(args[3])!, Int(args[4])!)
    let client = makeClient(try clientConfiguration(host, port, "pub"))
    try await client.connect()
    let payload = [UInt8](repeating: UInt8(ascii: "x"), count: size)
    for _ in 0..<count {
        try await client.publish(topic, payload: payload)
    }
    // Stay connected until the driver has the subscriber's result: `disconnect()` flushes queued
    // QoS 0 messages for at most a second, and a backlog of 200 000 can take longer.
    waitForEndOfInput()
    await client.disconnect()
    emit(["published": .int(Int64(count))])
}

func runResponder(_ args: [String]) async throws {
    let client = makeClient(try clientConfiguration(args[0], args[1], "responder"))
    try await client.connect()
    try await client.subscribe("bench/req")
    emit("ready")
    for try await message in client.messages {
        if message.payload == Array("stop".utf8) { break }
        try await client.publish("bench/rsp", payload: message.payload)
    }
    await client.disconnect()
}

func runRequester(_ args: [String]) async throws {
    let count = Int(args[2])!
    let client = makeClient(try clientConfiguration(args[0], args[1], "requester"))
    try await client.connect()
    try await client.subscribe("bench/rsp")
    var samples: [UInt64] = []
    samples.reserveCapacity(count)
    var responses = client.messages.makeAsyncIterator()
    for i in -(count / 10)..<count {
        let payload = Array(String(i).utf8)
        let start = monotonicNanoseconds()
        try await client.publish("bench/req", payload: payload)
        guard let response = await responses.next() else { throw BenchmarkError("response stream ended") }
        let end = monotonicNanoseconds()
        guard response.payload == payload else { throw BenchmarkError("unexpected response") }
        if i >= 0 { samples.append(end - start) }
    }
    try await client.publish("bench/req", payload: Array("stop".utf8))
    emit(LatencyPercentiles(nanoseconds: samples).json(count: count))
    try await Task.sleep(for: .milliseconds(100))
    await client.disconnect()
}

// MARK: - Driver

func drive(_ options: BenchmarkOptions) async throws {
    let baseline = try siblingExecutable("mqtt-baseline")
    let ours = currentExecutable
    let report = try await withBroker { broker in
        try measure(options, baseline: baseline, ours: ours, port: String(broker.port))
    }
    report.print(json: options.json)
}

func measure(_ options: BenchmarkOptions, baseline: URL, ours: URL, port: String) throws -> BenchmarkReport {
    let (messages, roundTrips, runs, size) =
        (options["--messages"], options["--round-trips"], options["--runs"], options["--size"])
    // --shim-variants 1: ours also with each trick of the C shim switched off (COATY_SHIM_DISABLE, see
    // Sources/CMosquittoShim/shim_internal.h), alternating with the others in every run.
    let variants = options["--shim-variants"] != 0
    var contenders: [(name: String, executable: URL, environment: [String: String])] = [("baseline", baseline, [:])]
    if variants {
        for disabled in ["", "direct", "quickack", "all"] {
            let name = disabled.isEmpty ? "ours" : "ours, \(disabled) off"
            contenders.append((name, ours, ["COATY_SHIM_DISABLE": disabled]))
        }
    } else {
        contenders.append(("ours", ours, [:]))
    }
    var throughput: [String: [Double]] = [:]
    var cpu: [String: [Double]] = [:]
    var publisherCPU: [String: [Double]] = [:]
    var p50: [String: [Double]] = [:]
    var p99: [String: [Double]] = [:]
    for run in 0..<runs {
        for (name, executable, environment) in contenders {
            let topic = "bench/throughput/\(run)"
            let cpuBefore = CPUTime.ofWaitedChildren
            let result = try runThroughput(
                subscriber: Role(
                    executable,
                    ["sub", "127.0.0.1", port, topic, String(messages)],
                    environment: environment
                ),
                publisher: Role(
                    executable,
                    ["pub", "127.0.0.1", port, topic, String(messages), String(size)],
                    environment: environment
                ),
                expected: messages
            )
            cpu[name, default: []].append((CPUTime.ofWaitedChildren - cpuBefore) / Double(messages) * 1e6)
            throughput[name, default: []].append(result.number("perSecond"))
            publisherCPU[name, default: []].append(result.number("publisherCPUSeconds") / Double(messages) * 1e6)
            let rt = try runRoundTrips(
                responder: Role(executable, ["responder", "127.0.0.1", port], environment: environment),
                requester: Role(
                    executable,
                    ["requester", "127.0.0.1", port, String(roundTrips)],
                    environment: environment
                )
            )
            p50[name, default: []].append(rt.number("p50"))
            p99[name, default: []].append(rt.number("p99"))
        }
    }
    var rows: [BenchmarkRow] = []
    for (name, _, _) in contenders.dropFirst() {
        let label = name == "ours" ? "" : " [\(name)]"
        rows += [
            BenchmarkRow(
                "throughput \(size) B QoS 0 (msg/s)\(label)",
                better: .higher,
                ours: median(throughput[name]!),
                baseline: median(throughput["baseline"]!)
            ),
            BenchmarkRow(
                "round trip p50 (µs)\(label)",
                better: .lower,
                ours: median(p50[name]!),
                baseline: median(p50["baseline"]!)
            ),
            BenchmarkRow(
                "round trip p99 (µs)\(label)",
                better: .lower,
                ours: median(p99[name]!),
                baseline: median(p99["baseline"]!)
            ),
        ]
        if variants {
            rows.append(
                BenchmarkRow(
                    "throughput CPU, publisher (µs/msg)\(label)",
                    better: .lower,
                    ours: median(publisherCPU[name]!),
                    baseline: median(publisherCPU["baseline"]!),
                    decimals: 2
                )
            )
            rows.append(
                BenchmarkRow(
                    "throughput CPU, publisher + subscriber (µs/msg)\(label)",
                    better: .lower,
                    ours: median(cpu[name]!),
                    baseline: median(cpu["baseline"]!),
                    decimals: 2
                )
            )
        }
    }
    return BenchmarkReport(
        title:
            "CoatyMQTT vs C libmosquitto baseline (median of \(runs) runs, \(messages) messages, \(roundTrips) round trips)",
        baselineHeader: "baseline (C)",
        parameters: options.parameters,
        rows: rows,
        notes: ["all \(messages) messages were received in every throughput run (checked)"]
    )
}

await benchmarkMain(
    "mqtt-benchmark",
    roles: ["sub": runSubscriber, "pub": runPublisher, "responder": runResponder, "requester": runRequester],
    defaults: ["--messages": 200_000, "--round-trips": 10_000, "--runs": 3, "--size": 300, "--shim-variants": 0],
    driver: drive
)
