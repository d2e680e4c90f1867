import ArgumentParser
import CoatyDiscovery
import CoatyKit
import Foundation
import Logging

/// `coaty broker`: advertise and find brokers over DNS-SD, as Coaty JS's `MulticastDnsDiscovery`.
struct BrokerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broker",
        abstract: "Advertise or find an MQTT broker over DNS-SD (mDNS), as Coaty JS does.",
        discussion: """
            A broker is advertised as a service of type \(BrokerDiscovery.coatyServiceType) named \
            '\(BrokerDiscovery.defaultName)' (by default) on its MQTT port, with its WebSocket port in \
            the TXT record as ws-port: Coaty JS's MulticastDnsDiscovery.findMqttBrokerService() finds it, \
            and every command's --broker auto (or auto:NAME) connects to it. Linux needs avahi-daemon \
            (and D-Bus); Apple systems have mDNSResponder.

            Examples:
              coaty broker advertise --port 1883 --ws-port 9001
              coaty broker find --timeout 5
              coaty observe advertise --core-type Identity --broker auto
            """,
        subcommands: [BrokerAdvertise.self, BrokerFind.self]
    )
}

/// The options both `broker` subcommands take.
struct DiscoveryOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The DNS-SD service name.", valueName: "name"))
    var name: String = BrokerDiscovery.defaultName

    @Option(
        help: ArgumentHelp(
            "Log level on stderr: trace, debug, info, notice, warning, error, critical.",
            valueName: "level"
        )
    )
    var logLevel: String = "warning"

    func validate() throws {
        guard (1...63).contains(name.utf8.count) else {
            throw ValidationError("--name must have 1 to 63 bytes.")
        }
        guard Logger.Level(rawValue: logLevel.lowercased()) != nil else {
            throw ValidationError(
                "--log-level '\(logLevel)' is unknown; use trace, debug, info, notice, warning, error or critical."
            )
        }
    }

    /// The discovery, logging on stderr at `--log-level`.
    var discovery: BrokerDiscovery {
        var logger = Logger(label: "coaty.broker", factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = Logger.Level(rawValue: logLevel.lowercased()) ?? .warning
        return BrokerDiscovery(logger: logger)
    }
}

/// `coaty broker advertise`: keeps a broker advertised until SIGINT/SIGTERM.
struct BrokerAdvertise: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "advertise",
        abstract: "Advertise a broker over DNS-SD until SIGINT/SIGTERM.",
        discussion: """
            Prints one JSON line once the daemon has registered the service: \
            {"event":"Advertised","name":…,"type":…,"port":…,"wsPort":…}. Exits 0 on SIGINT/SIGTERM, \
            withdrawing the advertisement; exits 1 when another service of the type already has the \
            name (on Apple systems the daemon renames it instead, and the line has the new name).
            """
    )

    @OptionGroup var options: DiscoveryOptions

    @Option(help: ArgumentHelp("The broker's MQTT port.", valueName: "port"))
    var port: Int = BrokerDiscovery.defaultPort

    @Option(
        name: .customLong("ws-port"),
        help: ArgumentHelp("The broker's WebSocket port (TXT record ws-port).", valueName: "port")
    )
    var webSocketPort: Int = BrokerDiscovery.defaultWebSocketPort

    @Option(
        help: ArgumentHelp(
            "The host name published as the service's target (it needs an mDNS address record, e.g. NAME.local). Default: this machine's .local name.",
            valueName: "host"
        )
    )
    var host: String?

    func validate() throws {
        for (option, value) in [("--port", port), ("--ws-port", webSocketPort)] where !(1...65_535).contains(value) {
            throw ValidationError("\(option) must be between 1 and 65535.")
        }
    }

    func run() async throws {
        let signals = ShutdownSignals()
        let registration: BrokerRegistration
        do {
            registration = try await options.discovery.publish(
                name: options.name,
                port: port,
                webSocketPort: webSocketPort,
                host: host
            )
        } catch let error as BrokerDiscoveryError {
            throw CLIError("\(error)")
        }
        let line: JSONValue = [
            "event": "Advertised", "name": .string(registration.name), "type": .string(registration.serviceType),
            "port": .int(Int64(port)), "wsPort": .int(Int64(webSocketPort)),
        ]
        Output.line("\(line)")
        _ = await signals.next()
        registration.cancel()
    }
}

/// `coaty broker find`: prints the URL of the broker advertised under a name.
struct BrokerFind: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find",
        abstract: "Find a broker advertised over DNS-SD and print its URL.",
        discussion: """
            Prints mqtt://HOST:PORT (HOST: the IPv4 address of the advertised host), or with --json \
            {"name":…,"url":…,"host":…,"hostName":…,"port":…,"wsPort":…}. Exits 1 with one line on \
            stderr when no broker of the name appears within --timeout.
            """
    )

    @OptionGroup var options: DiscoveryOptions

    @Option(help: ArgumentHelp("Seconds to wait for the broker to appear.", valueName: "seconds"))
    var timeout: Double = 5

    @Flag(help: "Print the whole endpoint as one JSON object.")
    var json = false

    func validate() throws {
        guard timeout > 0, timeout <= 3600 else {
            throw ValidationError("--timeout must be more than 0 and at most 3600 seconds.")
        }
    }

    func run() async throws {
        let broker: BrokerEndpoint
        do {
            broker = try await options.discovery.find(
                name: options.name,
                timeout: .milliseconds(Int64(timeout * 1000))
            )
        } catch let error as BrokerDiscoveryError {
            throw CLIError("\(error)")
        }
        guard json else {
            Output.line(broker.url)
            return
        }
        var line: JSONObject = [
            "name": .string(broker.name), "url": .string(broker.url), "host": .string(broker.host),
            "hostName": .string(broker.hostName), "port": .int(Int64(broker.port)),
        ]
        if let webSocketPort = broker.webSocketPort { line["wsPort"] = .int(Int64(webSocketPort)) }
        Output.line("\(JSONValue.object(line))")
    }
}
