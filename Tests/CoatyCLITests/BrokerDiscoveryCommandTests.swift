import CoatyDiscovery
import CoatyKit
import CoatyTesting
import DNSSDTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A DNS-SD service name no other test publishes.
private func uniqueBrokerName() -> String {
    "Coaty CLI Test Broker \(UUID().uuidString.prefix(8))"
}

@Suite(
    "coaty broker and --broker auto (DNS-SD, a private avahi-daemon on lo)",
    .serialized,
    .enabled("needs dbus-daemon, avahi-daemon and unshare (fails instead with CI=true)") {
        try await DNSSDDaemons.availableOrFailingInCI()
    },
    .timeLimit(.minutes(3))
)
struct BrokerDiscoveryCommandTests {
    @Test("coaty broker advertise is found by coaty broker find, and withdrawn on SIGTERM")
    func advertiseThenFind() async throws {
        let daemons = try await DNSSDDaemons.shared()
        let name = uniqueBrokerName()
        let advertiser = try CoatyProcess(
            ["broker", "advertise", "--name", name, "--port", "18840", "--ws-port", "19840"],
            environment: daemons.environment
        )
        let found = try await runCoaty(
            ["broker", "find", "--name", name, "--timeout", "30"],
            environment: daemons.environment
        )
        #expect(found.status == 0, "stderr: \(found.stderr)")
        #expect(found.stdout == "mqtt://127.0.0.1:18840\n")
        let json = try await runCoaty(
            ["broker", "find", "--name", name, "--timeout", "30", "--json"],
            environment: daemons.environment
        )
        let endpoint = try #require(try json.jsonLines().first)
        #expect(endpoint["wsPort"] == 19840)
        #expect(endpoint["port"] == 18840)
        #expect(endpoint["name"] == .string(name))

        advertiser.signal(SIGTERM)
        let advertised = await advertiser.finish()
        #expect(advertised.status == 0, "stderr: \(advertised.stderr)")
        let line = try #require(try advertised.jsonLines().first)
        #expect(line["event"] == "Advertised")
        #expect(line["name"] == .string(name))
        #expect(line["type"] == "_coaty-mqtt._tcp")
        #expect(advertised.stderr.isEmpty, "stderr: \(advertised.stderr)")
    }

    @Test("coaty broker find of a name nobody advertises exits 1 with one line on stderr")
    func findNothingFails() async throws {
        let daemons = try await DNSSDDaemons.shared()
        let name = uniqueBrokerName()
        let result = try await runCoaty(
            ["broker", "find", "--name", name, "--timeout", "1"],
            environment: daemons.environment
        )
        #expect(result.status == 1)
        #expect(result.stdout.isEmpty)
        #expect(result.stderrLines.count == 1, "stderr: \(result.stderr)")
        #expect(
            result.stderr.contains(
                "No broker named '\(name)' was advertised over DNS-SD (_coaty-mqtt._tcp) within 1 s"
            ),
            "stderr: \(result.stderr)"
        )
    }

    @Test("--broker auto:NAME connects to the mosquitto advertised under NAME")
    func autoNameConnectsToTheFoundBroker() async throws {
        let daemons = try await DNSSDDaemons.shared()
        let name = uniqueBrokerName()
        try await withBroker { broker in
            try await BrokerDiscovery().withPublishedBroker(name: name, port: broker.port) { _ in
                try await withAgent(on: broker) { agent in
                    // Ready means: its identity reached the agent on this broker.
                    let observed = try await expectObserverReceivesALamp(
                        connection: ["--broker", "auto:\(name)", "--log-level", "info"],
                        broker: broker,
                        agent: agent,
                        name: "observer-auto",
                        environment: daemons.environment
                    )
                    #expect(observed.stderr.contains("Found the broker over DNS-SD"), "stderr: \(observed.stderr)")
                }
            }
        }
    }

    @Test("--broker auto finds 'Coaty MQTT Broker' advertised by coaty broker advertise, and publishes through it")
    func autoWithTheDefaultName() async throws {
        let daemons = try await DNSSDDaemons.shared()
        try await withBroker { broker in
            let advertiser = try CoatyProcess(
                ["broker", "advertise", "--port", "\(broker.port)"],
                environment: daemons.environment
            )
            try await withAgent(on: broker) { agent in
                let lights = try agent.observeAdvertise(objectType: "com.example.Light")
                await lights.subscribed()
                let lampName = "Lamp \(UUID().uuidString.prefix(8))"
                let lamp = Samples.light(lampName)
                let sent = try await runCoaty(
                    ["advertise", "--broker", "auto", "--connect-timeout", "30", "\(lamp)"],
                    environment: daemons.environment
                )
                #expect(sent.status == 0, "stderr: \(sent.stderr)")
                let received = try await first(lights)
                #expect(received?.object.name == lampName)
            }
            advertiser.signal(SIGTERM)
            let advertised = await advertiser.finish()
            #expect(advertised.status == 0, "stderr: \(advertised.stderr)")
            #expect(try advertised.jsonLines().first?["name"] == "Coaty MQTT Broker")
        }
    }

    @Test("--broker auto in a failover list: not found, it is skipped for the next broker")
    func autoNotFoundFallsBackToTheNextBroker() async throws {
        let daemons = try await DNSSDDaemons.shared()
        try await withBroker { broker in
            let sent = try await runCoaty(
                [
                    "advertise", "--broker", "auto:\(uniqueBrokerName())", "--broker", broker.url,
                    "--connect-timeout", "1", "\(Samples.light())",
                ],
                environment: daemons.environment
            )
            #expect(sent.status == 0, "stderr: \(sent.stderr)")
            #expect(sent.stderr.contains("No broker named"), "stderr: \(sent.stderr)")
        }
    }
}

@Suite("coaty broker without a DNS-SD daemon", .serialized)
struct BrokerDiscoveryWithoutDaemonTests {
    @Test(
        "usage errors exit 2",
        arguments: [
            ["advertise", "--broker", "auto:", "{}"],
            ["advertise", "--broker", "auto", "--broker", "mqtts://127.0.0.1:8883", "{}"],
            ["broker", "advertise", "--port", "0"],
            ["broker", "advertise", "--ws-port", "65536"],
            ["broker", "find", "--timeout", "0"],
            ["broker", "find", "--name", ""],
        ]
    )
    func usageErrors(_ arguments: [String]) async throws {
        let result = try await runCoaty(arguments)
        #expect(result.status == 2, "stderr: \(result.stderr)")
    }

    @Test("no daemon reachable: exit 1 and one line naming avahi-daemon", .enabled(if: isLinux))
    func daemonMissingIsNamed() async throws {
        let directory = FileManager.default.temporaryDirectory.path
        let environment = [
            "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(directory)/no-bus-\(UUID().uuidString.prefix(8))",
            "AVAHI_COMPAT_NOWARN": "1",
        ]
        for arguments in [
            ["broker", "find", "--timeout", "5"], ["advertise", "--broker", "auto", "\(Samples.light())"],
        ] {
            let result = try await runCoaty(arguments, environment: environment)
            #expect(result.status == 1, "\(arguments)")
            #expect(result.stderrLines.count == 1, "stderr: \(result.stderr)")
            #expect(result.stderr.contains("start avahi-daemon"), "stderr: \(result.stderr)")
        }
    }
}

#if os(Linux)
    private let isLinux = true
#else
    private let isLinux = false
#endif
