import CoatyKit
import CoatyTesting
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Checks a runtime failure: exit 1, exactly one line on stderr (containing `expected`), no stdout.
func expectRuntimeFailure(
    _ result: CLIResult,
    mentioning expected: String,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(result.status == 1, "stderr: \(result.stderr)", sourceLocation: sourceLocation)
    #expect(result.stderrLines.count == 1, "stderr: \(result.stderr)", sourceLocation: sourceLocation)
    #expect(result.stderr.contains(expected), "stderr: \(result.stderr)", sourceLocation: sourceLocation)
    #expect(result.stdout.isEmpty, "stdout: \(result.stdout)", sourceLocation: sourceLocation)
}

@Suite("coaty exit codes and error messages", .serialized)
struct ExitCodeTests {
    static let object = #"{"objectType":"com.example.Light","coreType":"CoatyObject","name":"Lamp"}"#

    static let badJSON: [[String]] = [
        ["advertise", #"{"objectType":"#],
        ["advertise", "[1,2]"],
        ["advertise", #"{"objectType":"com.example.Light"}"#],
        ["channel", "alerts", "not json"],
        ["update", "{}"],
        ["query", "--core-types", "Task", "--filter", "{"],
        ["query", "--object-types", "a.b", "--join", #"{"asProperty":"x"}"#],
        ["call", "op", "--params", "3"],
        ["call", "op", "--context-filter", "[1"],
        ["advertise", object, "--private-data", "[]"],
    ]

    @Test("bad JSON fails with exit 1 and one line on stderr, before connecting", arguments: badJSON)
    func badJSONFails(_ arguments: [String]) async throws {
        // Port 1 has no broker: the input is checked before any connection attempt.
        let result = try await runCoaty(arguments + ["--broker", "mqtt://127.0.0.1:1"], timeout: 30)
        #expect(result.status == 1, "stderr: \(result.stderr)")
        #expect(result.stderrLines.count == 1, "stderr: \(result.stderr)")
        #expect(result.stderr.hasPrefix("coaty: error: "))
        #expect(!result.stderr.contains("Cannot reach"))
    }

    static let unknownCoreTypes: [[String]] = [
        ["observe", "advertise", "--core-type", "Lamp"],
        ["observe", "update", "--core-type", "Lamp"],
        ["discover", "--core-types", "Identity,Lamp"],
        ["query", "--core-types", "Lamp"],
    ]

    @Test("an unknown core type fails with exit 1 naming it and the known ones", arguments: unknownCoreTypes)
    func unknownCoreTypeFails(_ arguments: [String]) async throws {
        let result = try await runCoaty(arguments + ["--broker", "mqtt://127.0.0.1:1"], timeout: 30)
        expectRuntimeFailure(result, mentioning: "Unknown core type 'Lamp'")
        #expect(result.stderr.contains("Identity"))
    }

    static let usageErrors: [[String]] = [
        ["observe", "advertise"],
        ["observe", "advertise", "--core-type", "Task", "--object-type", "com.example.Light"],
        ["observe", "advertise", "--object-type", "com/example"],
        ["observe", "channel", "a+b"],
        ["observe", "raw", "a/#/b"],
        ["observe", "deadvertise", "--count", "0"],
        ["observe", "deadvertise", "--drop-oldest", "0"],
        ["observe", "raw", "a/b", "--buffer", "0"],
        ["observe", "channel", "c", "--buffer", "10", "--drop-newest", "5"],
        ["observe", "query", "--drop-oldest", "5", "--drop-newest", "5"],
        ["deadvertise", "not-a-uuid"],
        ["deadvertise"],
        ["discover"],
        ["discover", "--object-types", "a.b", "--core-types", "Task"],
        ["discover", "--object-id", "12"],
        ["query"],
        ["query", "--object-types", "a.b", "--core-types", "Task"],
        ["call"],
        ["raw", "coaty/3/-/ADV:Task/x", "data"],
        ["raw", "a/+/b", "data"],
        ["advertise", object, "--log-level", "loud"],
        ["advertise", object, "--namespace", "a/b"],
        ["advertise", object, "--broker", "http://127.0.0.1:1883"],
        ["advertise", object, "--ca-file", "/etc/hostname"],
        ["advertise", object, "--broker", "mqtts://127.0.0.1:8883", "--cert-file", "/etc/hostname"],
        ["advertise", object, "--connect-timeout", "0"],
        ["advertise", object, "--keepalive", "4"],  // libmosquitto's least is 5 s
        ["advertise", object, "--no-such-option"],
        ["advertise", object, "--mqtt-version", "4.0"],
        ["record", "--durable", "--mqtt-version", "5"],  // MQTT 5 keeps no persistent session here
        ["record", "--group", "g", "--mqtt-version", "5"],
        ["record", "--index", "com.example.Light"],
        ["record", "--index", "com.example.Light:a.b"],
        ["respond", "call", "op"],
        ["respond", "call", "op", "--result", "1", "--exec", "cat"],
        ["respond", "call", "op", "--result", "1", "--error-code", "1", "--error-message", "x"],
        ["respond", "call", "op", "--error-code", "1"],
        ["respond", "call", "op", "--error-message", "x"],
        ["respond", "call", "op", "--exec", " "],
        ["respond", "call", "a/b", "--result", "1"],
        ["respond", "call", "op", "--result", "1", "--count", "0"],
        ["respond", "discover"],
        ["respond", "query"],
        ["respond", "query", "--objects", "[]", "--timeout", "0"],
        ["view", "--http-port", "70000"],
        ["view", "--http-host", ""],
    ]

    @Test("usage errors exit 2 and say what is wrong on stderr", arguments: usageErrors)
    func usageErrorsExitTwo(_ arguments: [String]) async throws {
        let result = try await runCoaty(arguments, timeout: 30)
        #expect(result.status == 2, "stderr: \(result.stderr)")
        #expect(!result.stderr.isEmpty)
        #expect(result.stdout.isEmpty)
    }

    static let connectingCommands: [[String]] = [
        ["advertise", object],
        ["deadvertise", CoatyUUID().uuidString],
        ["observe", "advertise", "--core-type", "Task"],
        ["observe", "update", "--object-type", "com.example.Light"],
        ["discover", "--core-types", "Identity"],
        ["raw", "a/b", "c"],
        ["view", "--http-port", "0"],
    ]

    @Test("an unreachable broker fails with exit 1 and one line naming it", arguments: connectingCommands)
    func unreachableBroker(_ arguments: [String]) async throws {
        let port = try MosquittoBroker.freeLoopbackPort()
        let url = "mqtt://127.0.0.1:\(port)"
        let result = try await runCoaty(arguments + ["--broker", url, "--connect-timeout", "1"], timeout: 30)
        expectRuntimeFailure(result, mentioning: url)
    }

    @Test(
        "every command explains itself with examples in --help",
        arguments: [
            ["advertise"], ["deadvertise"], ["channel"], ["raw"], ["discover"], ["query"], ["update"], ["call"],
            ["observe"], ["observe", "advertise"], ["observe", "deadvertise"], ["observe", "channel"],
            ["observe", "update"], ["observe", "discover"], ["observe", "query"], ["observe", "call"],
            ["observe", "raw"],
            ["respond", "call"], ["respond", "discover"], ["respond", "query"],
            ["view"], ["demo"],
        ]
    )
    func helpHasExamples(_ command: [String]) async throws {
        let result = try await runCoaty(command + ["--help"], timeout: 30)
        #expect(result.status == 0)
        #expect(result.stdout.contains("Examples:"))
        #expect(result.stdout.contains("coaty \(command.joined(separator: " "))"))
        if command != ["observe"] {
            #expect(result.stdout.contains("--broker"))
        }
    }
}

@Suite("coaty security options", .serialized, .enabled(if: BrokerAvailability.shouldRun))
struct SecurityOptionTests {
    @Test("username and password: refused credentials fail with exit 1; $COATY_PASSWORD is used")
    func authentication() async throws {
        let directory = try TemporaryPath()
        let passwordFile = directory.path + "/passwords"
        try await writeMosquittoPasswordFile(passwordFile, user: "alice", password: "s3cret")
        let broker = try MosquittoBroker(passwordFile: passwordFile)
        try await broker.start()
        defer { _ = broker }
        let object = ExitCodeTests.object
        let refused = try await runCoaty(
            ["advertise", object, "--broker", broker.url, "--username", "alice", "--password", "wrong"],
            timeout: 30
        )
        expectRuntimeFailure(refused, mentioning: broker.url)
        #expect(!refused.stderr.contains("wrong"), "the password must not be printed")

        let anonymous = try await runCoaty(["advertise", object, "--broker", broker.url], timeout: 30)
        #expect(anonymous.status == 1, "stderr: \(anonymous.stderr)")
        #expect(anonymous.stderrLines.count == 1)

        let accepted = try await runCoaty(
            ["advertise", object, "--broker", broker.url, "--username", "alice"],
            environment: ["COATY_PASSWORD": "s3cret"],
            timeout: 30
        )
        #expect(accepted.status == 0, "stderr: \(accepted.stderr)")
        await broker.stop()
    }

    @Test("TLS: an unverifiable broker certificate fails with exit 1; --ca-file makes it work")
    func tls() async throws {
        let directory = try TemporaryPath()
        let pki = try await TestCertificates.make(in: directory.path)
        let broker = try MosquittoBroker(
            tls: .init(caFile: pki.caFile, certificateFile: pki.serverCertificate, privateKeyFile: pki.serverKey)
        )
        try await broker.start()
        let url = try #require(broker.tlsURL)
        let object = ExitCodeTests.object

        let unverified = try await runCoaty(["advertise", object, "--broker", url], timeout: 30)
        expectRuntimeFailure(unverified, mentioning: url)

        let wrongCA = try await runCoaty(
            ["advertise", object, "--broker", url, "--ca-file", pki.otherCAFile],
            timeout: 30
        )
        expectRuntimeFailure(wrongCA, mentioning: url)

        let verified = try await runCoaty(
            [
                "discover", "--core-types", "Identity", "--count", "1", "--timeout", "30", "--broker", url,
                "--ca-file", pki.caFile, "--name", "tls agent",
            ],
            timeout: 60
        )
        #expect(verified.status == 0, "stderr: \(verified.stderr)")
        #expect(try verified.jsonLines().first?.at("data.object.name") == "tls agent")
        await broker.stop()
    }
}

/// A temporary directory, removed on deinit.
final class TemporaryPath: Sendable {
    let path: String

    init() throws {
        path =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("coaty-cli-test-\(UUID().uuidString.lowercased())").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

@Suite("coaty connection failures and logging", .serialized)
struct ConnectionFailureTests {
    @Test(
        "a broker that accepts TCP but never answers fails with exit 1 after the connect timeout",
        arguments: [["advertise", ExitCodeTests.object], ["observe", "channel", "x"], ["call", "op"]]
    )
    func silentBroker(_ arguments: [String]) async throws {
        let listener = try SilentListener()
        let url = "mqtt://127.0.0.1:\(listener.port)"
        let result = try await runCoaty(arguments + ["--broker", url, "--connect-timeout", "1"], timeout: 30)
        expectRuntimeFailure(result, mentioning: url)
        _ = listener
    }

    @Test(
        "SIGINT while the broker has not answered CONNECT ends the command at once with exit 0",
        arguments: [
            ["observe", "channel", "x"], ["discover", "--core-types", "Identity"],
            ["observe", "update", "--object-type", "com.example.Light"],
        ]
    )
    func signalWhileConnecting(_ arguments: [String]) async throws {
        let listener = try SilentListener()
        let url = "mqtt://127.0.0.1:\(listener.port)"
        let process = try CoatyProcess(arguments + ["--broker", url, "--connect-timeout", "120"])
        #expect(listener.acceptConnection(within: 30), "the command never connected")
        process.signal(SIGINT)
        // Only the signal can end it before the 120 s connect timeout; a hang is killed after 30 s (and fails).
        let result = await process.finish(timeout: 30)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.stderr.isEmpty, "stderr: \(result.stderr)")
        #expect(result.stdout.isEmpty)
        withExtendedLifetime(listener) {}  // the connection stays open (and silent) until the command ended
    }

    @Test("SIGINT while PostgreSQL has not answered ends coaty record at once with exit 0")
    func signalWhileOpeningPostgres() async throws {
        let listener = try SilentListener()
        let process = try CoatyProcess([
            "record", "--db", "postgres://coaty@127.0.0.1:\(listener.port)/coaty?sslmode=disable",
            "--connect-timeout", "120",
        ])
        #expect(listener.acceptConnection(within: 30), "the recorder never connected")
        process.signal(SIGINT)
        // Only the signal can end it before the 120 s timeout; a hang is killed after 30 s (and fails).
        let result = await process.finish(timeout: 30)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.stderr.isEmpty, "stderr: \(result.stderr)")
        withExtendedLifetime(listener) {}  // the connection stays open (and silent) until the command ended
    }

    @Test("logs go to stderr at --log-level; stdout stays JSON lines only", .enabled(if: BrokerAvailability.shouldRun))
    func logsOnStderrOnly() async throws {
        try await withBroker { broker in
            let verbose = try await runCoaty(
                [
                    "discover", "--core-types", "Identity", "--count", "1", "--timeout", "30", "--log-level", "trace",
                    "--broker", broker.url,
                ],
                timeout: 60
            )
            #expect(verbose.status == 0, "stderr: \(verbose.stderr)")
            #expect(try verbose.jsonLines().count == 1)
            #expect(verbose.stderr.contains("Connected"), "stderr: \(verbose.stderr)")

            let quiet = try await runCoaty(
                ["discover", "--core-types", "Identity", "--count", "1", "--timeout", "30", "--broker", broker.url],
                timeout: 60
            )
            #expect(quiet.status == 0)
            #expect(try quiet.jsonLines().count == 1)
            #expect(quiet.stderr.isEmpty, "stderr: \(quiet.stderr)")
        }
    }
}

@Suite("coaty mutual TLS", .serialized, .enabled(if: BrokerAvailability.shouldRun))
struct MutualTLSTests {
    @Test("a broker requiring client certificates: refused without --cert-file/--key-file, accepted with them")
    func mutualTLS() async throws {
        let directory = try TemporaryPath()
        let pki = try await TestCertificates.make(in: directory.path)
        let client = try await pki.makeClientCertificate()
        let broker = try MosquittoBroker(
            tls: .init(
                caFile: pki.caFile,
                certificateFile: pki.serverCertificate,
                privateKeyFile: pki.serverKey,
                requireClientCertificate: true
            )
        )
        try await broker.start()
        let url = try #require(broker.tlsURL)
        let object = ExitCodeTests.object

        let anonymous = try await runCoaty(
            ["advertise", object, "--broker", url, "--ca-file", pki.caFile],
            timeout: 30
        )
        expectRuntimeFailure(anonymous, mentioning: url)

        let authenticated = try await runCoaty(
            [
                "discover", "--core-types", "Identity", "--count", "1", "--timeout", "30", "--broker", url,
                "--ca-file", pki.caFile, "--cert-file", client.certificate, "--key-file", client.key,
                "--name", "mtls agent",
            ],
            timeout: 60
        )
        #expect(authenticated.status == 0, "stderr: \(authenticated.stderr)")
        #expect(try authenticated.jsonLines().first?.at("data.object.name") == "mtls agent")
        await broker.stop()
    }
}
