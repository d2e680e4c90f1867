import AgentProcessTestSupport
import CoatyKit
import CoatyLocalBroker
import Foundation
import Testing

@testable import CoatyView

#if canImport(Glibc)
    import Glibc
#endif

/// The viewer's server in process, on a real mosquitto: its JSON endpoints, its WebSocket messages and its page.
@Suite(
    "The viewer's server over a real mosquitto",
    .enabled(if: BrokerAvailability.shouldRun, "mosquitto is not installed")
)
struct NetworkViewerTests {
    /// Runs `body` with a viewer (its own agent started) on a fresh broker.
    func withViewer(_ body: (MosquittoBroker, NetworkViewer, Int) async throws -> Void) async throws {
        try await withBroker { broker in
            let identity = Identity(name: "viewer under test")
            let manager = try CommunicationManager.mqtt(url: broker.url, identity: identity)
            try await manager.start()
            var tap = try MQTTConfiguration.coaty(url: broker.url, identityId: identity.objectId)
            tap.clientId += "-view"
            tap.will = nil
            let viewer = NetworkViewer(
                manager: manager,
                tap: tap,
                namespace: "-",
                configuration: NetworkViewer.Configuration(port: 0, pushInterval: .milliseconds(200))
            )
            let running = Task { try await viewer.run() }
            let port = try #require(await viewer.listeningPort())
            do {
                try await body(broker, viewer, port)
            } catch {
                running.cancel()
                _ = try? await running.value
                await manager.stop()
                throw error
            }
            running.cancel()
            try await running.value
            await manager.stop()
        }
    }

    func json(_ response: HTTPTestResponse) throws -> JSONValue { try JSONValue(parsing: response.body) }

    /// Polls `GET path` until `condition` holds (10 s).
    func poll(_ port: Int, _ path: String, _ condition: (JSONValue) -> Bool) async throws -> JSONValue {
        let deadline = ContinuousClock.now + .seconds(10)
        var last = JSONValue.null
        while ContinuousClock.now < deadline {
            last = try json(try await httpRequest(port: port, path: path))
            if condition(last) { return last }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("GET \(path) never showed what was expected; last: \(last)")
        return last
    }

    @Test("the JSON endpoints: state, agents, types, one type, filtered events, and their errors")
    func endpoints() async throws {
        try await withViewer { broker, viewer, port in
            let lamp = try CommunicationManager.mqtt(url: broker.url, identity: Identity(name: "Lamp agent"))
            try await lamp.start()
            struct Light: CoatyObject {
                static let objectType = "com.example.Light"
                var objectId = CoatyUUID()
                var name: String
            }
            for index in 0..<5 { try await lamp.publishAdvertise(Light(name: "Lamp \(index)")) }
            let state = try await poll(port, "/api/state") { state in
                state["types"]?.arrayValue?.first { $0["objectType"]?.stringValue == "com.example.Light" }?["count"]?
                    .intValue == 5
            }
            #expect(state["type"]?.stringValue == "state")
            #expect(state["connection"]?["state"]?.stringValue == "online")
            #expect(state["connection"]?["broker"]?.stringValue == broker.url)
            let agents = state["agents"]?.arrayValue ?? []
            #expect(agents.contains { $0["name"]?.stringValue == "Lamp agent" && $0["online"]?.boolValue == true })
            #expect(agents.contains { $0["name"]?.stringValue == "viewer under test" && $0["isViewer"]?.boolValue == true })
            #expect((state["rates"]?["series"]?["Advertise"]?.arrayValue?.count ?? 0) == 300)

            let type = try json(try await httpRequest(port: port, path: "/api/types/com.example.Light"))
            #expect(type["objects"]?.arrayValue?.first?["name"]?.stringValue == "Lamp 4")
            let missing = try await httpRequest(port: port, path: "/api/types/com.example.Nothing")
            #expect(missing.status == 404)
            #expect(try json(missing)["error"]?.stringValue?.contains("com.example.Nothing") == true)
            let agentsOnly = try json(try await httpRequest(port: port, path: "/api/agents"))
            #expect(agentsOnly["agents"]?.arrayValue?.count == agents.count)

            let events = try json(try await httpRequest(port: port, path: "/api/events?event=Advertise&agent=lamp&limit=3"))
            let listed = events["events"]?.arrayValue ?? []
            #expect(listed.count == 3)
            #expect(listed.allSatisfy { $0["event"]?.stringValue == "Advertise" && $0["sourceName"]?.stringValue == "Lamp agent" })
            await lamp.stop()
            // The agent's Deadvertise: shown left.
            _ = try await poll(port, "/api/agents") { agents in
                agents["agents"]?.arrayValue?.contains {
                    $0["name"]?.stringValue == "Lamp agent" && $0["online"]?.boolValue == false
                } == true
            }
            _ = viewer
        }
    }

    @Test("POST /api/ask: a Discover answered by an agent on the network; an invalid request refused with 400")
    func ask() async throws {
        try await withViewer { broker, _, port in
            let responder = try CommunicationManager.mqtt(url: broker.url, identity: Identity(name: "Responder"))
            try await responder.start()
            let answered = try json(
                try await httpRequest(
                    port: port,
                    path: "/api/ask",
                    method: "POST",
                    body: #"{"kind":"discover","coreTypes":["Identity"],"timeout":500}"#
                )
            )
            let responses = answered["responses"]?.arrayValue ?? []
            let names = responses.flatMap { $0["objects"]?.arrayValue ?? [] }.compactMap { $0["name"]?.stringValue }
            #expect(names.contains("Responder"), "\(answered)")
            #expect(responses.allSatisfy { ($0["latency"]?.doubleValue ?? -1) >= 0 })
            #expect((answered["elapsed"]?.doubleValue ?? 0) >= 500)
            // Only JSON (a cross-site page cannot send it without a preflight the server does not grant).
            let plain = try await httpRequest(
                port: port,
                path: "/api/ask",
                method: "POST",
                body: #"{"kind":"discover","coreTypes":["Identity"]}"#,
                contentType: "text/plain"
            )
            #expect(plain.status == 415)
            let refused = try await httpRequest(port: port, path: "/api/ask", method: "POST", body: #"{"kind":"query"}"#)
            #expect(refused.status == 400)
            #expect(try json(refused)["error"]?.stringValue?.contains("objectTypes") == true)
            await responder.stop()
        }
    }

    @Test("the WebSocket sends a state message at once and then one per interval, each a full state")
    func webSocketMessages() async throws {
        try await withViewer { _, _, port in
            let socket = try TestWebSocket(port: port, path: "/ws")
            defer { socket.close() }
            let first = try JSONValue(parsing: try await socket.nextText())
            let clock = ContinuousClock()
            let start = clock.now
            let second = try JSONValue(parsing: try await socket.nextText())
            #expect(clock.now - start < .seconds(5))
            for message in [first, second] {
                #expect(message["type"]?.stringValue == "state")
                for key in ["time", "connection", "viewer", "totals", "agents", "types", "rates", "latencies", "events", "eventsSkipped"] {
                    #expect(message[key] != nil, "a state message without '\(key)'")
                }
            }
            #expect((second["time"]?.int64Value ?? 0) > (first["time"]?.int64Value ?? 0))
        }
    }

    @Test("the page is served from the binary, and the embedded copy is the page's sources")
    func pageServed() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        for asset in EmbeddedAssets.all {
            let file = root.appendingPathComponent("Sources/CoatyView/Assets/\(asset.file)")
            let text = try String(contentsOf: file, encoding: .utf8)
            #expect(
                text.trimmingCharacters(in: .newlines) == asset.text,
                "\(asset.file) differs from EmbeddedAssets.swift: run Scripts/embed-view-assets"
            )
        }
        try await withViewer { _, _, port in
            let page = try await httpRequest(port: port, path: "/")
            #expect(page.status == 200)
            #expect(page.headers["content-type"]?.hasPrefix("text/html") == true)
            #expect(page.body.contains("<title>Coaty view</title>"))
            let script = try await httpRequest(port: port, path: "/app.js")
            #expect(script.headers["content-type"]?.hasPrefix("text/javascript") == true)
            #expect(script.body.contains("WebSocket"))
            #expect(try await httpRequest(port: port, path: "/nothing-here").status == 404)
        }
    }
}

@Suite("coaty view's failures", .enabled(if: BrokerAvailability.shouldRun, "mosquitto is not installed"))
struct ViewCommandFailureTests {
    @Test("a port in use fails with exit 1 and one line naming it; the agent it started is stopped")
    func portInUse() async throws {
        let coaty = try builtExecutable(named: "coaty")
        try await withBroker { broker in
            let taken = try SilentListener()
            let viewer = try TestProcess(executable: coaty, ["view", "--broker", broker.url, "--http-port", "\(taken.port)"])
            let result = await viewer.finish(timeout: 30)
            #expect(result.status == 1, "stderr: \(result.stderr)")
            #expect(result.stderrLines.count == 1, "stderr: \(result.stderr)")
            #expect(result.stderr.hasPrefix("coaty: error: Cannot serve the view on 127.0.0.1:\(taken.port)"))
            #expect(result.stdout.isEmpty)
        }
    }
}

/// A minimal WebSocket client (RFC 6455) for the tests: it upgrades and reads the server's unmasked text frames.
final class TestWebSocket: Sendable {
    let fd: Int32

    init(port: Int, path: String) throws {
        fd = try connectLoopback(port: port, timeout: 30)
        let request =
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        _ = Array(request.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var head: [UInt8] = []
        while !head.suffix(4).elementsEqual(Array("\r\n\r\n".utf8)) {
            head += try read(1)
        }
        let status = String(decoding: head, as: UTF8.self).split(separator: "\r\n").first ?? ""
        guard status.contains(" 101 ") else { throw TestSupportError("no WebSocket upgrade: \(status)") }
    }

    func read(_ count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var have = 0
        while have < count {
            let n = bytes[have...].withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw TestSupportError("the WebSocket closed or timed out (errno \(errno))") }
            have += n
        }
        return bytes
    }

    /// The next text message (blocking a thread of its own).
    func nextText() async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try self.readText() })
            }
        }
    }

    private func readText() throws -> String {
        while true {
            let header = try read(2)
            var length = Int(header[1] & 0x7F)
            if length == 126 {
                length = try read(2).reduce(0) { $0 << 8 | Int($1) }
            } else if length == 127 {
                length = try read(8).reduce(0) { $0 << 8 | Int($1) }
            }
            let payload = try read(length)
            if header[0] & 0x0F == 1 { return String(decoding: payload, as: UTF8.self) }
        }
    }

    func close() {
        #if canImport(Glibc)
            _ = Glibc.close(fd)
        #else
            _ = Darwin.close(fd)
        #endif
    }
}

// DocC snippet CoatyView begins
func viewerExample() async throws {  // wrapper
let identity = Identity(name: "network view")
let manager = try CommunicationManager.mqtt(url: "mqtt://127.0.0.1:1883", identity: identity)
try await manager.start()
var tap = try MQTTConfiguration.coaty(url: "mqtt://127.0.0.1:1883", identityId: identity.objectId)
tap.clientId += "-view"
tap.will = nil
let viewer = NetworkViewer(manager: manager, tap: tap, namespace: "-",
                           configuration: NetworkViewer.Configuration(port: 8080))
try await viewer.run()    // a swift-service-lifecycle Service: put it in a ServiceGroup
}  // wrapper
// DocC snippet CoatyView ends

@Suite("The CoatyView catalog")
struct CoatyViewCatalogTests {
    @Test("the catalog's first Swift example is the code compiled in NetworkViewerTests.swift")
    func exampleCompiles() throws {
        let (article, compiled) = try catalogExample(of: "CoatyView", compiledIn: #filePath)
        #expect(!article.isEmpty)
        #expect(article == compiled, "CoatyView.md's example differs from NetworkViewerTests.swift: update both")
    }
}
