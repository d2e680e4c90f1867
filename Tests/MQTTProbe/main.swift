// coaty-mqtt-probe: a tiny helper process for the CoatyMQTT tests.
//
//   coaty-mqtt-probe will URL CLIENT_ID WILL_TOPIC WILL_PAYLOAD
//       connects with a last will, prints "ready" on stdout, then waits to be killed.
//   coaty-mqtt-probe publish URL CLIENT_ID TOPIC PAYLOAD
//       connects, publishes one QoS 1 message, disconnects and exits 0.
//   coaty-mqtt-probe churn URL CYCLES
//   coaty-mqtt-probe agent-churn URL CYCLES
//       CYCLES × (connect, publish QoS 0 and QoS 1, subscribe, disconnect) with a new client each time
//       (agent-churn: start a new Coaty agent, observe, advertise, Discover its own identity, stop),
//       printing this process's open file descriptors, threads and resident memory (from /proc) as a
//       JSON line after the first tenth of the cycles and again at the end.
//
// Exits 1 with a message on stderr on failure, 2 on a usage error.

import CoatyKit
import CoatyMQTT

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

func writeLine(_ text: String, to descriptor: Int32) {
    let bytes = Array((text + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
}

func fail(_ message: String, code: Int32 = 1) -> Never {
    writeLine("coaty-mqtt-probe: \(message)", to: 2)
    exit(code)
}

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.count == 3, ["churn", "agent-churn"].contains(arguments[0]), let cycles = Int(arguments[2]), cycles >= 10 {
    do {
        if arguments[0] == "churn" {
            try await churn(url: arguments[1], cycles: cycles)
        } else {
            try await agentChurn(url: arguments[1], cycles: cycles)
        }
        exit(0)
    } catch {
        fail("\(error)")
    }
}
guard arguments.count == 5 else {
    fail("usage: coaty-mqtt-probe (will|publish) URL CLIENT_ID TOPIC PAYLOAD", code: 2)
}
let (command, url, clientId, topic, payload) = (arguments[0], arguments[1], arguments[2], arguments[3], arguments[4])

do {
    var configuration = try MQTTConfiguration(url: url, clientId: clientId)
    switch command {
    case "will":
        configuration.will = MQTTMessage(topic: topic, payload: Array(payload.utf8), qos: .atLeastOnce)
        let client = MQTTClient(configuration: configuration)
        try await client.connect()
        writeLine("ready", to: 1)
        while true { try await Task.sleep(for: .seconds(3600)) }
    case "publish":
        let client = MQTTClient(configuration: configuration)
        try await client.connect()
        try await client.publish(topic, payload: Array(payload.utf8), qos: .atLeastOnce)
        await client.disconnect()
    default:
        fail("unknown command \(command)", code: 2)
    }
} catch {
    fail("\(error)")
}

/// Open file descriptors, threads and resident kilobytes of this process (from /proc).
struct Usage {
    var descriptors: Int
    var threads: Int
    var residentKiB: Int

    static func now() -> Usage {
        func count(_ directory: String) -> Int {
            guard let stream = opendir(directory) else { return -1 }
            defer { closedir(stream) }
            var entries = 0
            while let entry = readdir(stream) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
                if name != Array(".".utf8) && name != Array("..".utf8) { entries += 1 }
            }
            return entries
        }
        // /proc/self/statm: "size resident shared …" in pages.
        var residentKiB = -1
        let fd = open("/proc/self/statm", O_RDONLY)
        if fd >= 0 {
            var buffer = [UInt8](repeating: 0, count: 256)
            let n = read(fd, &buffer, buffer.count)
            close(fd)
            let fields = String(decoding: buffer.prefix(max(n, 0)), as: UTF8.self).split(separator: " ")
            if fields.count > 1, let pages = Int(fields[1]) { residentKiB = pages * Int(getpagesize()) / 1024 }
        }
        return Usage(descriptors: count("/proc/self/fd"), threads: count("/proc/self/task"), residentKiB: residentKiB)
    }

    /// Once what the last cycle released has gone: an agent's connection and its network thread's
    /// descriptors are freed when the last reference to its client goes, which can be a task of the
    /// agent finishing just after `stop()` returned (a CI run under full load saw the last agent's
    /// five descriptors still open: 9 -> 14). Samples for up to two seconds and keeps the sample
    /// with the fewest descriptors; a leak, one per cycle, stays.
    static func settled() async -> Usage {
        var best = now()
        for _ in 0..<40 {
            try? await Task.sleep(for: .milliseconds(50))
            let sample = now()
            if sample.descriptors < best.descriptors { best = sample }
        }
        return best
    }

    /// The JSON line the test reads.
    func line(_ label: String, cycles: Int) -> String {
        #"{"at":"\#(label)","cycles":\#(cycles),"fds":\#(descriptors),"threads":\#(threads),"rssKiB":\#(residentKiB)}"#
    }
}

/// See the header: connect/disconnect cycles with a fresh client each time.
func churn(url: String, cycles: Int) async throws {
    let warmUp = cycles / 10
    for cycle in 0..<cycles {
        if cycle == warmUp { writeLine(await Usage.settled().line("warm", cycles: cycle), to: 1) }
        let client = MQTTClient(configuration: try MQTTConfiguration(url: url, clientId: "churn-\(cycle)"))
        try await client.connect()
        try await client.subscribe("churn/\(cycle % 7)")
        try await client.publish("churn/x", payload: Array("cycle \(cycle)".utf8))
        try await client.publish("churn/y", payload: Array("cycle \(cycle)".utf8), qos: .atLeastOnce)
        await client.disconnect()
    }
    writeLine(await Usage.settled().line("end", cycles: cycles), to: 1)
}

/// See the header: a Coaty agent started and stopped, each time a new one.
func agentChurn(url: String, cycles: Int) async throws {
    let warmUp = cycles / 10
    for cycle in 0..<cycles {
        if cycle == warmUp { writeLine(await Usage.settled().line("warm", cycles: cycle), to: 1) }
        let identity = Identity(name: "churn \(cycle)")
        let manager = try CommunicationManager.mqtt(url: url, identity: identity)
        try await manager.start()
        let advertised = try manager.observeAdvertise(coreType: .coatyObject)
        await advertised.subscribed()
        try await manager.publishAdvertise(identity)
        _ = try await manager.publishDiscover(.objectId(identity.objectId)).first(timeout: .seconds(5))
        await manager.stop()
    }
    writeLine(await Usage.settled().line("end", cycles: cycles), to: 1)
}
