import ArgumentParser
import CoatyDiscovery
import CoatyKit
import Foundation
import Logging

/// The connection options every subcommand takes (`@OptionGroup`), as the CLI contract says.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: .customLong("broker"),
        help: ArgumentHelp(
            "The broker, mqtt://HOST:PORT or mqtts://HOST:PORT (TLS, verified), or auto / auto:NAME for the broker advertised over DNS-SD (mDNS) as 'Coaty MQTT Broker' / NAME (looked up within --connect-timeout); repeat it for failover brokers, tried in order. Default: $COATY_BROKER (a comma-separated list), else mqtt://127.0.0.1:1883.",
            valueName: "url"
        )
    )
    var brokers: [String] = Self.environmentBrokers(ProcessInfo.processInfo.environment["COATY_BROKER"])

    /// The primary broker URL (the first `--broker`).
    var broker: String { brokers.first ?? "mqtt://127.0.0.1:1883" }

    /// The brokers of `COATY_BROKER`, a comma-separated list, or the local default broker.
    static func environmentBrokers(_ value: String?) -> [String] {
        let listed = (value ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let brokers = listed.filter { !$0.isEmpty }
        return brokers.isEmpty ? ["mqtt://127.0.0.1:1883"] : brokers
    }

    @Option(
        help: ArgumentHelp(
            "The Coaty namespace (characters A-Z a-z 0-9 . - _). Default: $COATY_NAMESPACE, else -.",
            valueName: "ns"
        )
    )
    var namespace: String = ProcessInfo.processInfo.environment["COATY_NAMESPACE"] ?? CoatyTopic.defaultNamespace

    @Flag(help: "Receive events of every namespace (publications still use --namespace).")
    var crossNamespace = false

    @Option(help: ArgumentHelp("The name of this agent's identity.", valueName: "name"))
    var name: String?

    @Option(help: ArgumentHelp("The user name for the broker.", valueName: "user"))
    var username: String?

    @Option(
        help: ArgumentHelp(
            "The password for the broker. Default: $COATY_PASSWORD (prefer it: argv is visible).",
            valueName: "password"
        )
    )
    var password: String?

    @Option(help: ArgumentHelp("A PEM CA file to verify the broker certificate (mqtts:// only).", valueName: "path"))
    var caFile: String?

    @Option(help: ArgumentHelp("A PEM client certificate for mutual TLS (with --key-file).", valueName: "path"))
    var certFile: String?

    @Option(help: ArgumentHelp("The PEM private key of --cert-file.", valueName: "path"))
    var keyFile: String?

    @Option(
        help: ArgumentHelp(
            "Log level on stderr: trace, debug, info, notice, warning, error, critical.",
            valueName: "level"
        )
    )
    var logLevel: String = "warning"

    @Option(help: ArgumentHelp("Seconds to wait for the broker to accept the connection.", valueName: "seconds"))
    var connectTimeout: Double = 5

    @Option(help: ArgumentHelp("The MQTT keepalive interval in seconds (5…65535).", valueName: "seconds"))
    var keepalive: Int = 60

    @Option(
        help: ArgumentHelp(
            "The least MQTT QoS of every publication and subscription: 0 (Coaty's default) or 1 (at least once).",
            valueName: "0|1"
        )
    )
    var qos: Int = 0

    @Option(
        help: ArgumentHelp(
            "The kind of broker: standard, or rabbitmq for RabbitMQ's MQTT plugin (it delivers every '.' inside a topic level as '/'; CoatyKit reads such topics back). Default: $COATY_BROKER_TYPE, else standard.",
            valueName: "type"
        )
    )
    var brokerType: String = ProcessInfo.processInfo.environment["COATY_BROKER_TYPE"] ?? BrokerType.standard.rawValue

    @Option(
        help: ArgumentHelp(
            "The MQTT protocol version: 3.1.1 (Coaty's, the default) or 5 (requests and responses carry their trace context as user properties; MQTT 3.1.1 peers such as Coaty JS get the same messages). Default: $COATY_MQTT_VERSION, else 3.1.1.",
            valueName: "3.1.1|5"
        )
    )
    var mqttVersion: String = ProcessInfo.processInfo.environment["COATY_MQTT_VERSION"] ?? "3.1.1"

    @Option(
        help: ArgumentHelp(
            "Export traces to this OpenTelemetry collector (OTLP over HTTP, e.g. http://127.0.0.1:4318); the standard OTEL_* variables apply. Default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or $OTEL_EXPORTER_OTLP_ENDPOINT, else no export.",
            valueName: "url"
        )
    )
    var otlpEndpoint: String?

    /// The protocol version of `--mqtt-version` (validated by ``validate()``).
    var mqttProtocolVersion: MQTTProtocolVersion { mqttVersion == "5" ? .v5 : .v311 }

    /// The broker type of `--broker-type` (validated by ``validate()``).
    var brokerKind: BrokerType { BrokerType(name: brokerType) ?? .standard }

    func validate() throws {
        guard Logger.Level(rawValue: logLevel.lowercased()) != nil else {
            throw ValidationError(
                "--log-level '\(logLevel)' is unknown; use trace, debug, info, notice, warning, error or critical."
            )
        }
        guard connectTimeout > 0, connectTimeout <= 3600 else {
            throw ValidationError("--connect-timeout must be more than 0 and at most 3600 seconds.")
        }
        guard qos == 0 || qos == 1 else {
            throw ValidationError("--qos must be 0 or 1.")
        }
        if let otlpEndpoint {
            guard let url = URL(string: otlpEndpoint), ["http", "https"].contains(url.scheme ?? ""), url.host != nil
            else {
                throw ValidationError("--otlp-endpoint '\(otlpEndpoint.prefix(80))' is not an http:// or https:// URL.")
            }
        }
        guard ["3.1.1", "4", "5"].contains(mqttVersion) else {
            throw ValidationError("--mqtt-version '\(mqttVersion.prefix(40))' is unknown; use 3.1.1 or 5.")
        }
        guard BrokerType(name: brokerType) != nil else {
            throw ValidationError("--broker-type '\(brokerType.prefix(80))' is unknown; use standard or rabbitmq.")
        }
        // libmosquitto refuses a keep-alive under 5 s.
        guard (5...65_535).contains(keepalive) else {
            throw ValidationError("--keepalive must be between 5 and 65535 seconds.")
        }
        do {
            _ = try CoatyTopic.subscriptionFilter(for: .discover, namespace: namespace)
        } catch {
            throw ValidationError("--namespace '\(namespace)' is invalid: use characters A-Z a-z 0-9 . - _ only.")
        }
        let configuration: MQTTConfiguration
        do {
            // An `auto` entry becomes an mqtt:// URL once found; checked as one here (names, schemes).
            let urls = try brokers.map { entry in
                guard let name = Self.discoveredBrokerName(entry) else { return entry }
                guard (1...63).contains(name.utf8.count) else {
                    throw ValidationError("the DNS-SD name of '\(entry)' must have 1 to 63 bytes")
                }
                return "mqtt://127.0.0.1:\(BrokerDiscovery.defaultPort)"
            }
            configuration = try MQTTConfiguration(urls: urls, clientId: "coaty-cli")
        } catch {
            throw ValidationError("--broker: \(error)")
        }
        if configuration.tls == nil, caFile != nil || certFile != nil || keyFile != nil {
            throw ValidationError("--ca-file, --cert-file and --key-file need an mqtts:// broker URL.")
        }
        if (certFile == nil) != (keyFile == nil) {
            throw ValidationError("--cert-file and --key-file go together.")
        }
        for (option, path) in [("--ca-file", caFile), ("--cert-file", certFile), ("--key-file", keyFile)] {
            if let path, !FileManager.default.isReadableFile(atPath: path) {
                throw ValidationError("\(option): cannot read '\(path)'.")
            }
        }
    }

    /// The DNS-SD service name an `auto` (the Coaty default name) or `auto:NAME` broker entry asks
    /// for; `nil` for a URL.
    static func discoveredBrokerName(_ entry: String) -> String? {
        if entry == "auto" { return BrokerDiscovery.defaultName }
        guard entry.hasPrefix("auto:") else { return nil }
        return String(entry.dropFirst("auto:".count))
    }

    /// These options with every `auto` broker replaced by the URL of the broker DNS-SD finds, each
    /// looked up for at most `--connect-timeout`. In a failover list an `auto` broker that is not
    /// found is left out (with a warning); when no broker remains, the lookup's error is thrown.
    /// - Parameter logger: where found brokers (info) and skipped ones (warning) are logged.
    /// - Returns: the options with URLs only.
    /// - Throws: ``CLIError`` with one line: not found, or the DNS-SD daemon is not running.
    func resolvingDiscoveredBrokers(logger: Logger) async throws -> ConnectionOptions {
        var discovery = BrokerDiscovery(logger: logger)
        discovery.resolveTimeout = .milliseconds(Int64(connectTimeout * 1000))
        var urls: [String] = []
        var failures: [String] = []
        for entry in brokers {
            guard let name = Self.discoveredBrokerName(entry) else {
                urls.append(entry)
                continue
            }
            do {
                let broker = try await discovery.find(name: name, timeout: .milliseconds(Int64(connectTimeout * 1000)))
                logger.info("Found the broker over DNS-SD", metadata: ["name": "\(name)", "url": "\(broker.url)"])
                urls.append(broker.url)
            } catch let error as BrokerDiscoveryError {
                failures.append("\(error)")
                if brokers.count > 1 { logger.warning("\(error) Trying the other brokers.") }
            }
        }
        guard !urls.isEmpty else { throw CLIError(failures.joined(separator: " ")) }
        var resolved = self
        resolved.brokers = urls
        return resolved
    }

    /// The logger: a stream handler on stderr at `--log-level`.
    func makeLogger(label: String = "coaty") -> Logger {
        let provider = Telemetry.metadataProvider
        var logger = Logger(
            label: label,
            factory: { StreamLogHandler.standardError(label: $0, metadataProvider: provider) }
        )
        logger.logLevel = Logger.Level(rawValue: logLevel.lowercased()) ?? .warning
        return logger
    }

    /// The MQTT configuration for an agent with `identityId` (Coaty client id, protocol defaults).
    func mqttConfiguration(identityId: CoatyUUID) throws -> MQTTConfiguration {
        var configuration = try MQTTConfiguration.coaty(urls: brokers, identityId: identityId)
        configuration.keepAlive = .seconds(keepalive)
        configuration.protocolVersion = mqttProtocolVersion
        configuration.connectTimeout = .milliseconds(Int64(connectTimeout * 1000))
        if let username { configuration.username = username }
        if let password = password ?? ProcessInfo.processInfo.environment["COATY_PASSWORD"] {
            configuration.password = password
        }
        if configuration.tls != nil {
            configuration.tls?.caFile = caFile
            configuration.tls?.certificateFile = certFile
            configuration.tls?.privateKeyFile = keyFile
        }
        return configuration
    }

    /// The communication manager options.
    var managerOptions: CommunicationManager.Options {
        var options = CommunicationManager.Options(
            namespace: namespace,
            crossNamespacing: crossNamespace,
            qos: qos == 1 ? .atLeastOnce : .atMostOnce
        )
        options.brokerType = brokerKind
        return options
    }

    /// The broker URL without credentials, for messages (with failover brokers, every URL, comma-separated).
    var brokerForMessages: String {
        guard let configuration = try? MQTTConfiguration(urls: brokers, clientId: "coaty-cli") else {
            return brokers.joined(separator: ", ")
        }
        return configuration.brokers.map(\.url).joined(separator: ", ")
    }
}
