import AgentProcessTestSupport
import CoatyDiscovery
import DNSSDTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Testing

/// A service name no other test (or test process on the same loopback mDNS) publishes.
func uniqueName(_ prefix: String = "Coaty Test Broker") -> String {
    "\(prefix) \(UUID().uuidString.prefix(8))"
}

/// The next event of `iterator` about the broker `name` (browsing sees the other tests' brokers too).
func nextEvent(
    named name: String,
    in iterator: inout BrokerBrowser.AsyncIterator
) async throws -> BrokerBrowseEvent? {
    while let event = try await iterator.next() {
        switch event {
        case .found(let broker) where broker.name == name: return event
        case .lost(let lost) where lost == name: return event
        default: continue
        }
    }
    return nil
}

@Suite(
    "Broker discovery over DNS-SD (a private avahi-daemon on lo)",
    .enabled("needs dbus-daemon, avahi-daemon and unshare (fails instead with CI=true)") {
        try await DNSSDDaemons.availableOrFailingInCI()
    },
    .timeLimit(.minutes(2))
)
struct BrokerDiscoveryTests {
    @Test("a published broker is found by name, with its port, WebSocket port and loopback address")
    func publishThenFind() async throws {
        let discovery = BrokerDiscovery()
        let name = uniqueName()
        let registration = try await discovery.publish(name: name, port: 18_830, webSocketPort: 19_830)
        defer { registration.cancel() }
        #expect(registration.name == name)
        #expect(registration.serviceType == "_coaty-mqtt._tcp")

        let broker = try await discovery.find(name: name, timeout: .seconds(30))
        #expect(broker.name == name)
        #expect(broker.port == 18_830)
        #expect(broker.webSocketPort == 19_830)
        #expect(broker.txtRecord == ["ws-port": "19830"])
        #expect(broker.host == "127.0.0.1")
        #expect(broker.hostName.hasSuffix(".local"))
        #expect(broker.url == "mqtt://127.0.0.1:18830")
        #expect(broker.webSocketURL == "ws://127.0.0.1:19830")
    }

    @Test("Coaty JS's defaults: port 1883 and ws-port 9883")
    func defaultsAreCoatyJSDefaults() async throws {
        let discovery = BrokerDiscovery()
        let name = uniqueName()
        try await discovery.withPublishedBroker(name: name) { registration in
            #expect(registration.port == 1883)
            let broker = try await discovery.find(name: name, timeout: .seconds(30))
            #expect(broker.port == 1883)
            #expect(broker.webSocketPort == 9883)
        }
    }

    @Test("a host name as the target is published, and resolved to its address")
    func hostNameTarget() async throws {
        let daemons = try await DNSSDDaemons.shared()
        let discovery = BrokerDiscovery()
        let name = uniqueName()
        let registration = try await discovery.publish(name: name, port: 18_831, host: daemons.hostName)
        defer { registration.cancel() }
        let broker = try await discovery.find(name: name, timeout: .seconds(30))
        #expect(broker.hostName == daemons.hostName)
        #expect(broker.url == "mqtt://127.0.0.1:18831")
    }

    @Test("finding a name nobody advertises ends with notFound naming it")
    func unknownNameIsNotFound() async throws {
        let name = uniqueName("Nobody Advertises This")
        let error = await #expect(throws: BrokerDiscoveryError.self) {
            try await BrokerDiscovery().find(name: name, timeout: .milliseconds(1500))
        }
        #expect(error == .notFound(name: name, serviceType: "_coaty-mqtt._tcp", seconds: 1.5))
        #expect(
            error?.description
                == "No broker named '\(name)' was advertised over DNS-SD (_coaty-mqtt._tcp) within 1.5 s."
        )
    }

    @Test("browse reports a broker found, and lost once its registration is cancelled")
    func browseSeesFoundThenLost() async throws {
        let discovery = BrokerDiscovery()
        let name = uniqueName()
        var iterator = discovery.browse().makeAsyncIterator()
        let registration = try await discovery.publish(name: name, port: 18_832, webSocketPort: 19_832)
        let found = try await nextEvent(named: name, in: &iterator)
        guard case .found(let broker) = found else {
            Issue.record("expected the broker found, got \(String(describing: found))")
            return
        }
        #expect(broker.port == 18_832)
        #expect(broker.webSocketPort == 19_832)
        registration.cancel()
        #expect(try await nextEvent(named: name, in: &iterator) == .lost(name: name))
    }

    @Test("a second broker under a taken name is refused with nameConflict; the first stays found")
    func nameConflictIsReported() async throws {
        let discovery = BrokerDiscovery()
        let name = uniqueName()
        let first = try await discovery.publish(name: name, port: 18_833)
        defer { first.cancel() }
        let error = await #expect(throws: BrokerDiscoveryError.self) {
            try await discovery.publish(name: name, port: 18_834)
        }
        #expect(error == .nameConflict(name: name, serviceType: "_coaty-mqtt._tcp"))
        #expect(try await discovery.find(name: name, timeout: .seconds(30)).port == 18_833)
    }

    @Test("BrokerAdvertisement is published while its ServiceGroup runs, and withdrawn at graceful shutdown")
    func advertisementServiceFollowsTheGroup() async throws {
        let discovery = BrokerDiscovery()
        let name = uniqueName()
        let advertisement = BrokerAdvertisement(name: name, port: 18_835, webSocketPort: 19_835, discovery: discovery)
        let group = ServiceGroup(
            services: [advertisement],
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        var iterator = discovery.browse().makeAsyncIterator()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let found = try await nextEvent(named: name, in: &iterator)
            guard case .found(let broker) = found else {
                Issue.record("expected the broker found, got \(String(describing: found))")
                await group.triggerGracefulShutdown()
                return
            }
            #expect(broker.port == 18_835)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            #expect(try await nextEvent(named: name, in: &iterator) == .lost(name: name))
        }
    }

}
