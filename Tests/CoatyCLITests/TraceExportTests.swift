import CoatyKit
import CoatyTesting
import Foundation
import Testing

/// The CLI's OpenTelemetry export, against a real OTLP/HTTP receiver on loopback: a small Python server the test
/// starts, which stores every body POSTed to `/v1/traces` (OTLP/JSON, `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`).
@Suite("coaty exports traces over OTLP", .serialized)
struct TraceExportTests {
    /// The receiver: answers each POST with `{}` and appends its body as one line to the file given.
    static let receiver = #"""
        import http.server, sys
        out = open(sys.argv[1], "ab", buffering=0)
        class Receiver(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                out.write(self.path.encode() + b" " + body.replace(b"\n", b" ") + b"\n")
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")
            def log_message(self, *args):
                pass
        server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
        print("listening", server.server_address[1], file=sys.stderr, flush=True)
        server.serve_forever()
        """#

    /// Starts ``receiver`` storing into `file`; the process and its endpoint (`http://127.0.0.1:PORT`).
    static func startCollector(storingIn file: String) async throws -> (TestProcess, String) {
        let collector = try TestProcess(executable: "/usr/bin/python3", ["-c", receiver, file])
        guard let listening = await collector.stderrLine(containing: "listening", timeout: 30),
            let port = listening.split(separator: " ").last
        else {
            collector.signal(SIGKILL)
            throw TestSupportError("the OTLP receiver did not start (python3 -c …)")
        }
        return (collector, "http://127.0.0.1:\(port)")
    }

    /// One exported span: its service, name, ids and string attributes.
    struct ExportedSpan {
        let service: String
        let name: String
        let traceId: String
        let spanId: String
        let parentSpanId: String
        let attributes: [String: String]
    }

    /// The spans of every export the receiver stored in `file`.
    static func spans(in file: String) throws -> [ExportedSpan] {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { return [] }
        var spans: [ExportedSpan] = []
        for line in text.split(separator: "\n") {
            guard let space = line.firstIndex(of: " "), line[..<space] == "/v1/traces" else { continue }
            let export = try JSONValue(parsing: Array(line[line.index(after: space)...].utf8))
            for resource in export["resourceSpans"]?.arrayValue ?? [] {
                let service = Self.attributes(resource.at("resource.attributes"))["service.name"] ?? ""
                for scope in resource["scopeSpans"]?.arrayValue ?? [] {
                    for span in scope["spans"]?.arrayValue ?? [] {
                        spans.append(
                            ExportedSpan(
                                service: service,
                                name: span["name"]?.stringValue ?? "",
                                traceId: span["traceId"]?.stringValue ?? "",
                                spanId: span["spanId"]?.stringValue ?? "",
                                parentSpanId: span["parentSpanId"]?.stringValue ?? "",
                                attributes: Self.attributes(span["attributes"])
                            )
                        )
                    }
                }
            }
        }
        return spans
    }

    static func attributes(_ list: JSONValue?) -> [String: String] {
        var result: [String: String] = [:]
        for attribute in list?.arrayValue ?? [] {
            if let key = attribute["key"]?.stringValue, let value = attribute.at("value.stringValue")?.stringValue {
                result[key] = value
            }
        }
        return result
    }

    @Test("coaty discover → coaty record over MQTT 5: both export their spans to the collector, in one trace")
    func discoverAnsweredByTheRecorderIsOneExportedTrace() async throws {
        try await withTemporaryDirectory { directory in
            let received = directory + "/otlp.lines"
            let (collector, endpoint) = try await Self.startCollector(storingIn: received)
            defer { collector.signal(SIGKILL) }
            // The standard variables for one process, --otlp-endpoint for the other.
            let otel = ["OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_BSP_SCHEDULE_DELAY": "200"]
            try await withBroker { broker in
                try await withAgent(on: broker, name: "publisher") { agent in
                    let recorder = try await startReadyCoaty(
                        [
                            "record", "--db", directory + "/objects.sqlite", "--mqtt-version", "5", "--log-level", "info",
                            "--broker", broker.url,
                        ],
                        name: "recorder",
                        observer: agent,
                        environment: otel.merging(["OTEL_EXPORTER_OTLP_ENDPOINT": endpoint]) { $1 }
                    )
                    let lamp = Identity(name: "lamp")
                    try await agent.publishAdvertise(lamp)
                    var resolved = false
                    for _ in 0..<50 where !resolved {
                        let discover = try await runCoaty(
                            [
                                "discover", "--object-id", lamp.objectId.uuidString, "--count", "1", "--timeout", "2",
                                "--mqtt-version", "5", "--otlp-endpoint", endpoint, "--broker", broker.url,
                            ],
                            // The option wins over the variable (nothing listens on port 9).
                            environment: otel.merging(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"]) { $1 }
                        )
                        #expect(discover.status == 0, "stderr: \(discover.stderr)")
                        resolved = discover.stdout.contains(lamp.objectId.uuidString)
                    }
                    #expect(resolved, "the recorder stored the lamp and answered")
                    // A Query ordered by a property not indexed yet: the recorder creates the index while it answers,
                    // and logs it (info) in the Query's trace context.
                    let light = #"{"objectType":"com.example.Light","coreType":"CoatyObject","name":"Lamp","room":"hall"}"#
                    let advertised = try await runCoaty(["advertise", light, "--broker", broker.url])
                    #expect(advertised.status == 0, "stderr: \(advertised.stderr)")
                    var retrieved = false
                    for _ in 0..<50 where !retrieved {
                        let query = try await runCoaty(
                            [
                                "query", "--object-types", "com.example.Light", "--filter",
                                #"{"orderByProperties":[["room","Asc"]]}"#, "--count", "1", "--timeout", "2",
                                "--mqtt-version", "5", "--broker", broker.url,
                            ]
                        )
                        retrieved = query.stdout.contains("hall")
                    }
                    #expect(retrieved)
                    recorder.signal(SIGTERM)  // a clean stop exports what is still queued
                    let stopped = await recorder.finish(timeout: 60)
                    #expect(stopped.status == 0, "stderr: \(stopped.stderr)")
                    let indexLine = stopped.stderr.split(separator: "\n").first { $0.contains("Created an index") }
                    #expect(indexLine?.contains("trace_id=") == true, "log: \(indexLine ?? "none")")
                    #expect(indexLine?.contains("span_id=") == true)
                }
            }
            let spans = try Self.spans(in: received)
            let sent = spans.filter { $0.name == "Discover send" && $0.service == "coaty discover" }
            let handled = spans.filter {
                $0.name == "Discover process" && $0.service == "coaty record"
                    && $0.attributes["coaty.request.outcome"] == "response"
            }
            let answered = try #require(handled.last, "spans: \(spans.map { "\($0.service): \($0.name)" })")
            let request = try #require(sent.first { $0.spanId == answered.parentSpanId }, "the answered Discover's parent")
            #expect(request.traceId == answered.traceId)
            #expect(request.parentSpanId.isEmpty, "the request is the trace's root")
            #expect(answered.attributes["messaging.system"] == "mqtt")
            let lookup = try #require(spans.first { $0.name == "coaty.record store lookup" && $0.parentSpanId == answered.spanId })
            #expect(lookup.traceId == request.traceId)
        }
    }

    @Test("a collector that never answers: the command still ends about 5 s after its work, and says the spans were dropped")
    func unansweringCollectorIsCutOffAndLogged() async throws {
        // Accepts connections and reads, never answers.
        let silent = #"""
            import socket, sys, threading, time
            server = socket.socket()
            server.bind(("127.0.0.1", 0))
            server.listen(16)
            print("listening", server.getsockname()[1], file=sys.stderr, flush=True)
            held = []
            while True:
                connection, _ = server.accept()
                held.append(connection)
            """#
        let collector = try TestProcess(executable: "/usr/bin/python3", ["-c", silent])
        defer { collector.signal(SIGKILL) }
        let listening = try #require(await collector.stderrLine(containing: "listening", timeout: 30))
        let port = try #require(listening.split(separator: " ").last)
        try await withBroker { broker in
            try await withAgent(on: broker, name: "answering") { agent in
                let clock = ContinuousClock()
                let start = clock.now
                let discover = try await runCoaty(
                    [
                        "discover", "--object-id", agent.identity.objectId.uuidString, "--count", "1", "--timeout", "5",
                        "--otlp-endpoint", "http://127.0.0.1:\(port)", "--broker", broker.url,
                    ],
                    environment: ["OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"]
                )
                let elapsed = clock.now - start
                #expect(discover.status == 0, "stderr: \(discover.stderr)")
                #expect(discover.stdout.contains(agent.identity.objectId.uuidString))
                #expect(discover.stderr.contains("Stopped exporting traces after 5"), "stderr: \(discover.stderr)")
                #expect(elapsed < .seconds(30), "the cut-off bounds the exit (took \(elapsed))")
            }
        }
    }

    @Test("four processes, one trace: coaty call → coaty respond call --exec 'coaty discover …' → coaty record")
    func callAnsweredByADiscoverIsOneTraceAcrossFourProcesses() async throws {
        try await withTemporaryDirectory { directory in
            let received = directory + "/otlp.lines"
            let (collector, endpoint) = try await Self.startCollector(storingIn: received)
            defer { collector.signal(SIGKILL) }
            let otel = [
                "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
                "OTEL_BSP_SCHEDULE_DELAY": "200",
            ]
            let coaty = try coatyExecutable()
            try await withBroker { broker in
                try await withAgent(on: broker, name: "publisher") { agent in
                    let recorder = try await startReadyCoaty(
                        ["record", "--db", directory + "/objects.sqlite", "--mqtt-version", "5", "--broker", broker.url],
                        name: "recorder",
                        observer: agent,
                        environment: otel
                    )
                    let lamp = Identity(name: "lamp")
                    try await agent.publishAdvertise(lamp)
                    // The responder's command is a traced coaty request of its own (it inherits the OTEL_* variables).
                    let lookup = "\(coaty) discover --object-id \(lamp.objectId) --count 1 --timeout 5 --mqtt-version 5 --broker \(broker.url)"
                    let responder = try await startReadyCoaty(
                        ["respond", "call", "lookup", "--exec", lookup, "--mqtt-version", "5", "--broker", broker.url],
                        name: "responder",
                        observer: agent,
                        environment: otel
                    )
                    var returned = false
                    for _ in 0..<30 where !returned {
                        let call = try await runCoaty(
                            ["call", "lookup", "--count", "1", "--timeout", "10", "--mqtt-version", "5", "--broker", broker.url],
                            environment: otel
                        )
                        #expect(call.status == 0, "stderr: \(call.stderr)")
                        returned = call.stdout.contains(lamp.objectId.uuidString)
                    }
                    #expect(returned, "the Call returned the Resolve the responder's discover printed")
                    // The running agents export every 200 ms (OTEL_BSP_SCHEDULE_DELAY): wait until the recorder's
                    // answered Discover and the responder's handled Call arrived, rather than relying on the
                    // export at the stop, which a loaded machine can take longer for (the first test covers it).
                    let deadline = ContinuousClock.now + .seconds(60)
                    while ContinuousClock.now < deadline {
                        let exported = try Self.spans(in: received)
                        let handled = Set(
                            exported.filter { $0.attributes["coaty.request.outcome"] == "response" }
                                .map { "\($0.service): \($0.name)" }
                        )
                        if handled.isSuperset(of: ["coaty record: Discover process", "coaty respond call: Call process"]) {
                            break
                        }
                        try await Task.sleep(for: .milliseconds(100))
                    }
                    for process in [responder, recorder] { process.signal(SIGTERM) }
                    for process in [responder, recorder] { _ = await process.finish(timeout: 60) }
                }
            }
            let spans = try Self.spans(in: received)
            func answered(_ name: String, by service: String) -> [ExportedSpan] {
                spans.filter {
                    $0.name == name && $0.service == service && $0.attributes["coaty.request.outcome"] == "response"
                }
            }
            let listing = spans.map { "\($0.service): \($0.name)" }
            let discoverHandled = try #require(answered("Discover process", by: "coaty record").last, "\(listing)")
            let discoverSent = try #require(
                spans.first { $0.spanId == discoverHandled.parentSpanId && $0.service == "coaty discover" }, "\(listing)"
            )
            let callHandled = try #require(
                spans.first { $0.spanId == discoverSent.parentSpanId && $0.service == "coaty respond call" },
                "\(listing)"
            )
            #expect(callHandled.name == "Call process")
            let callSent = try #require(
                spans.first { $0.spanId == callHandled.parentSpanId && $0.service == "coaty call" }, "\(listing)"
            )
            #expect(callSent.name == "Call send")
            #expect(callSent.parentSpanId.isEmpty)
            #expect(Set([callSent, callHandled, discoverSent, discoverHandled].map(\.traceId)).count == 1, "one trace")
        }
    }
}
