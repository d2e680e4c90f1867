// service-group-agent: CoatyKit embedded in a service. A ServiceGroup (swift-service-lifecycle)
// runs the agent's CommunicationManager and a heartbeat service of our own. SIGINT or SIGTERM
// (or --duration) shuts them down gracefully in reverse order: the heartbeat deadvertises its
// status object, then the manager deadvertises the identity and disconnects.
//
// Its connection comes from an AgentConfiguration: a JSON file in Coaty JS's layout named by
// $COATY_CONFIG (broker URL, namespace, credentials, keep-alive, TLS files, identity, agentInfo)
// and the COATY_* variables; --broker overrides the broker URL.
//
//   swift run service-group-agent [--broker mqtt://127.0.0.1:1883] [--interval 1] [--duration SECONDS]
//   COATY_CONFIG=agent.json swift run service-group-agent

import ArgumentParser
import CoatyKit
import Foundation
import Logging
import ServiceLifecycle
import UnixSignals  // .sigterm, .sigint (needed with the MemberImportVisibility upcoming feature)

/// The status the heartbeat advertises.
struct ServiceStatus: CoatyObject {
    static let objectType = "com.example.service.Status"
    var objectId = CoatyUUID()
    var name: String
    var beats: Int
}

/// A service of our own: advertises the status every `interval` until graceful shutdown, then
/// deadvertises it (the manager is still online then: it shuts down after us).
struct Heartbeat: Service {
    let agent: CommunicationManager
    let interval: Duration

    func run() async throws {
        var status = ServiceStatus(name: "Heartbeat of \(agent.identity.name)", beats: 0)
        while !Task.isShuttingDownGracefully {
            status.beats += 1
            try await agent.publishAdvertise(status)  // deferred while offline, sent once online
            print("advertised beat \(status.beats)")
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
        }
        try await agent.publishDeadvertise([status.objectId])
        print("deadvertised \(status.objectId)")
    }
}

@main
struct ServiceGroupAgent: AsyncParsableCommand {
    @Option(
        help:
            "The broker, mqtt://HOST:PORT or mqtts://HOST:PORT; default: $COATY_BROKER, else $COATY_CONFIG's, else mqtt://127.0.0.1:1883."
    )
    var broker: String?

    @Option(help: "Seconds between two heartbeats.")
    var interval: Double = 1

    @Option(help: "Shut down gracefully after this many seconds (default: on SIGINT or SIGTERM only).")
    var duration: Double?

    func run() async throws {
        // Inject the logger; swift-log's default handler writes to stderr.
        let logger = Logger(label: "service-group-agent")
        var configuration = try AgentConfiguration.load()  // $COATY_CONFIG, then COATY_* variables
        if let broker { configuration.brokerURL = broker }
        if configuration.name == AgentConfiguration().name { configuration.name = "Service group agent" }
        try configuration.validate()
        let agent = try CommunicationManager.mqtt(configuration: configuration, logger: logger)
        // The manager first: graceful shutdown runs in reverse order, so the heartbeat stops
        // (and deadvertises) while the manager is still connected.
        let group = ServiceGroup(
            services: [agent, Heartbeat(agent: agent, interval: .seconds(interval))],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        )
        if let duration {
            Task {
                try await Task.sleep(for: .seconds(duration))
                await group.triggerGracefulShutdown()
            }
        }
        try await group.run()
        print("stopped gracefully")
    }
}
