// mqtt-benchmark: CoatyMQTT against the C libmosquitto baseline, in the same run, against a
// broker this program starts with a pinned configuration.
//
//   swift build -c release --product mqtt-benchmark --product mqtt-baseline
//   .build/release/mqtt-benchmark [--json] [--messages N] [--round-trips N] [--runs K]
//
// (Benchmarks/run does both steps.) Each scenario runs the baseline and ours alternately K times
// and reports the median of each and their ratio. Roles (`sub`, `pub`, `responder`, `requester`)
// are the same command line as mqtt-baseline's, so the driver runs both sides identically.
import CoatyMQTT
import Foundation
import Logging
import Synchronization

// MARK: - Roles (CoatyMQTT side)

func clientConfiguration(_ host: String, _ port: String, _ role: String) throws -> MQTTConfiguration {
    var configuration = try MQTTConfiguration(url: "mqtt://\(host):\(port)", clientId: "bench-\(role)-\(getpid())")
    // The C baseline queues without bound; give ours room for a whole run so that the figure
    // measures speed. Anything dropped is still counted and reported.
    configuration.messageBufferCapacity = 1_000_000
    return configuration
}

func makeClient(_ configuration: MQTTConfiguration) -> MQTTClient {
    var logger = Logger(label: "mqtt-benchmark")
    logger.logLevel = .warning
    return MQTTClient(configuration: configuration, logger: logger)
}

func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
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
    let progress = Atomic<Int>(0)
    // A watchdog ends the run when nothing arrives for 3 s, so a loss shows as a short count
    // instead of a hang.
    let watchdog = Task {
        var seen = -1
        while !Task.isCancelled {
            try await Task.sleep(for: .seconds(3))
            let now = progress.load(ordering: .relaxed)
            if now == seen { await client.disconnect(); return }
            seen = now
        }
    }
    for try await message in client.messages {
        last = monotonicNanoseconds()
        if received == 0 { first = last }
        received += 1
        bytes += message.payload.count
        if received & 1023 == 0 { progress.store(received, ordering: .relaxed) }
        if received == count { break }
    }
    watchdog.cancel()
    let seconds = Double(last - first) / 1e9
    emit(#"{"received":\#(received),"bytes":\#(bytes),"seconds":\#(seconds),"perSecond":\#(Double(received - 1) / seconds),"dropped":\#(client.droppedMessageCount)}"#)
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
    await client.disconnect()
    print(#"{"published":\#(count)}"#)
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
    samples.sort()
    let p50 = Double(samples[count / 2]) / 1000
    let p99 = Double(samples[count * 99 / 100]) / 1000
    emit(#"{"count":\#(count),"p50":\#(p50),"p99":\#(p99)}"#)
    try await Task.sleep(for: .milliseconds(100))
    await client.disconnect()
}

/// Writes one line to standard output unbuffered, so the driver sees it at once.
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

struct BenchmarkError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Driver

/// A child process whose standard output is read line by line.
final class Child {
    let process = Process()
    let output = Pipe()
    private var buffer: [UInt8] = []

    init(_ executable: URL, _ arguments: [String]) throws {
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = output
        try process.run()
    }

    /// The next line of output, or nil at end of file.
    func readLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return buffer.isEmpty ? nil : String(decoding: buffer, as: UTF8.self) }
            buffer.append(contentsOf: chunk)
        }
    }

    /// The first output line that parses as a JSON object.
    func readJSON() throws -> [String: Any] {
        while let line = readLine() {
            if line.hasPrefix("{"), let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] {
                return object
            }
        }
        throw BenchmarkError("\(process.executableURL!.lastPathComponent) ended without a result")
    }

    func expectReady() throws {
        guard readLine() == "ready" else { throw BenchmarkError("\(process.executableURL!.lastPathComponent) did not get ready") }
    }

    func wait() { process.waitUntilExit() }
}

struct Options {
    var json = false
    var messages = 200_000
    var roundTrips = 10_000
    var runs = 3
    var size = 300

    init(_ arguments: ArraySlice<String>) throws {
        var it = arguments.makeIterator()
        while let argument = it.next() {
            switch argument {
            case "--json": json = true
            case "--messages": messages = Int(it.next() ?? "") ?? messages
            case "--round-trips": roundTrips = Int(it.next() ?? "") ?? roundTrips
            case "--runs": runs = Int(it.next() ?? "") ?? runs
            case "--size": size = Int(it.next() ?? "") ?? size
            default: throw BenchmarkError("unknown option \(argument) (options: --json --messages N --round-trips N --runs K --size BYTES)")
            }
        }
    }
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

func throughputRun(_ executable: URL, port: Int, options: Options, run: Int) throws -> Double {
    let topic = "bench/throughput/\(run)"
    let sub = try Child(executable, ["sub", "127.0.0.1", String(port), topic, String(options.messages)])
    try sub.expectReady()
    let pub = try Child(executable, ["pub", "127.0.0.1", String(port), topic, String(options.messages), String(options.size)])
    let result = try sub.readJSON()
    pub.wait()
    sub.wait()
    guard let received = result["received"] as? Int, received == options.messages else {
        throw BenchmarkError(
            "\(executable.lastPathComponent) received \(result["received"] ?? "nothing") of \(options.messages) (dropped: \(result["dropped"] ?? 0))"
        )
    }
    return result["perSecond"] as? Double ?? 0
}

func roundTripRun(_ executable: URL, port: Int, options: Options) throws -> (p50: Double, p99: Double) {
    let responder = try Child(executable, ["responder", "127.0.0.1", String(port)])
    try responder.expectReady()
    let requester = try Child(executable, ["requester", "127.0.0.1", String(port), String(options.roundTrips)])
    let result = try requester.readJSON()
    requester.wait()
    responder.wait()
    return (result["p50"] as? Double ?? .nan, result["p99"] as? Double ?? .nan)
}

func drive(_ options: Options) async throws {
    let directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    let baseline = directory.appendingPathComponent("mqtt-baseline")
    let ours = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    guard FileManager.default.isExecutableFile(atPath: baseline.path) else {
        throw BenchmarkError("\(baseline.path) not found: build it with `swift build -c release --product mqtt-baseline`")
    }
    let broker = try MosquittoBroker()
    try await broker.start()
    do {
        try await measure(options, baseline: baseline, ours: ours, port: broker.port)
    } catch {
        await broker.stop()
        throw error
    }
    await broker.stop()
}

func measure(_ options: Options, baseline: URL, ours: URL, port: Int) async throws {

    var throughput: [String: [Double]] = ["baseline": [], "ours": []]
    var p50: [String: [Double]] = ["baseline": [], "ours": []]
    var p99: [String: [Double]] = ["baseline": [], "ours": []]
    for run in 0..<options.runs {
        for (name, executable) in [("baseline", baseline), ("ours", ours)] {
            throughput[name]!.append(try throughputRun(executable, port: port, options: options, run: run))
            let rt = try roundTripRun(executable, port: port, options: options)
            p50[name]!.append(rt.p50)
            p99[name]!.append(rt.p99)
        }
    }
    let rows: [(String, String, Double, Double, Bool)] = [
        ("throughput \(options.size) B QoS 0 (msg/s)", "higher", median(throughput["ours"]!), median(throughput["baseline"]!), true),
        ("round trip p50 (µs)", "lower", median(p50["ours"]!), median(p50["baseline"]!), false),
        ("round trip p99 (µs)", "lower", median(p99["ours"]!), median(p99["baseline"]!), false),
    ]
    if options.json {
        let entries = rows.map { row in
            #"{"scenario":"\#(row.0)","better":"\#(row.1)","ours":\#(row.2),"baseline":\#(row.3),"ratio":\#(row.2 / row.3)}"#
        }
        print(#"{"runs":\#(options.runs),"messages":\#(options.messages),"roundTrips":\#(options.roundTrips),"results":[\#(entries.joined(separator: ","))]}"#)
    } else {
        print("CoatyMQTT vs C libmosquitto baseline (median of \(options.runs) runs, \(options.messages) messages, \(options.roundTrips) round trips)")
        print("| scenario | ours | baseline (C) | ratio ours/baseline |")
        print("|---|---:|---:|---:|")
        for row in rows {
            print("| \(row.0) | \(String(format: "%.1f", row.2)) | \(String(format: "%.1f", row.3)) | \(String(format: "%.2f", row.2 / row.3)) |")
        }
        print("all \(options.messages) messages were received in every throughput run (checked)")
    }
}

let arguments = CommandLine.arguments.dropFirst()
do {
    switch arguments.first {
    case "sub": try await runSubscriber(Array(arguments.dropFirst()))
    case "pub": try await runPublisher(Array(arguments.dropFirst()))
    case "responder": try await runResponder(Array(arguments.dropFirst()))
    case "requester": try await runRequester(Array(arguments.dropFirst()))
    default: try await drive(try Options(arguments))
    }
} catch {
    FileHandle.standardError.write(Data("mqtt-benchmark: \(error)\n".utf8))
    exit(1)
}
