import ArgumentParser
import CoatyKit
import CoatyView
import Foundation
import Logging

/// `coaty view`: a live web view of the Coaty network (agents, objects by type, events, rates and latencies, and a
/// form that asks the network), served on loopback.
struct View: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "view",
        abstract: "Watch the Coaty network in a web browser: agents, objects, events, rates and latencies.",
        discussion: """
            One process: an agent on the Coaty network and a web server. Open the URL it prints on stderr \
            (http://127.0.0.1:8080/ by default). The page updates live over a WebSocket; scripts GET the same state \
            as JSON from /api/state, /api/agents, /api/types, /api/types/TYPE and /api/events, and POST a Discover \
            or Query to /api/ask. The viewer reconnects by itself when the broker goes, and shows "offline" meanwhile.

            With --cross-namespace it shows every namespace, else the one of --namespace.

            Examples:
              coaty view
              coaty view --broker mqtt://broker.local:1883 --http-port 9000
              coaty view --cross-namespace --http-host 0.0.0.0   # reachable from other machines
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(
        help: ArgumentHelp(
            "The port of the web page (0: a free port, printed on stderr). Default: 8080.",
            valueName: "port"
        )
    )
    var httpPort: Int = 8_080

    @Option(
        help: ArgumentHelp(
            "The address the web page binds. Default: 127.0.0.1 (this machine only).",
            valueName: "host"
        )
    )
    var httpHost: String = "127.0.0.1"

    func validate() throws {
        if !(0...65_535).contains(httpPort) { throw ValidationError("--http-port must be between 0 and 65535.") }
        if httpHost.isEmpty { throw ValidationError("--http-host must not be empty.") }
    }

    func run() async throws {
        let signals = ShutdownSignals()
        let agent = try await CLIAgent(connection, defaultName: "coaty view")
        var tap = agent.mqttConfiguration
        tap.clientId = "\(tap.clientId)-view"
        tap.will = nil
        let viewer = NetworkViewer(
            manager: agent.manager,
            tap: tap,
            namespace: connection.crossNamespace ? nil : connection.namespace,
            configuration: NetworkViewer.Configuration(host: httpHost, port: httpPort),
            logger: agent.logger
        )
        try await agent.start(interruptedBy: signals)
        let (host, broker) = (httpHost, agent.options.brokerForMessages)
        // Until a signal, or the viewer ends by itself (a failure); the URL is printed once it listens.
        var failure: (any Error)?
        do {
            try await withThrowingTaskGroup(of: Void?.self) { group in
                group.addTask { try await viewer.run() }
                group.addTask {
                    guard let port = await viewer.listeningPort() else { return nil }
                    let shown = host == "0.0.0.0" || host == "::" ? "127.0.0.1" : host
                    let url = "http://\(shown.contains(":") ? "[\(shown)]" : shown):\(port)/"
                    FileHandle.standardError.write(
                        Data("Viewing the Coaty network of \(broker) at \(url) (Ctrl-C stops)\n".utf8)
                    )
                    return nil
                }
                group.addTask { await signals.next() ? () : nil }
                try await group.firstDecision(or: ())
            }
        } catch {
            failure = error
        }
        await agent.stop()
        if let failure {
            throw CLIError(failure is NetworkViewer.CannotListen ? "\(failure)" : "coaty view failed: \(failure)")
        }
    }
}
