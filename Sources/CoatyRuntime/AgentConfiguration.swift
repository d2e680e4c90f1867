public import CoatyCommunication
import CoatyFilter
public import CoatyModel
public import CoatyStore
import Foundation
public import Logging
public import Metrics

/// An agent's configuration: identity, agent information, broker connection (URL, credentials,
/// keep-alive, TLS), namespace, QoS, databases and the options of its controllers, from code, a
/// JSON file in Coaty JS 2.4's layout, and `COATY_*` environment variables.
///
/// ```json
/// {
///   "common": {
///     "agentIdentity": { "name": "Light agent", "objectId": "…" },
///     "agentInfo": { "packageInfo": { "name": "light-agent", "version": "1.2.0" },
///                    "buildInfo": { "buildDate": "2024-05-01T10:00:00.000Z", "buildMode": "production" },
///                    "configInfo": { "serviceHost": "" } },
///     "extra": { "site": "plant 4" }
///   },
///   "communication": {
///     "brokerUrl": "mqtts://broker:8883", "namespace": "home", "shouldEnableCrossNamespacing": false,
///     "mqttClientOptions": { "username": "light", "password": "…", "keepalive": 30,
///                            "ca": "/etc/coaty/ca.pem", "cert": "/etc/coaty/light.pem", "key": "/etc/coaty/light.key" }
///   },
///   "controllers": { "LightController": { "room": "kitchen" } },
///   "databases": { "store": { "adapter": "SqLiteNodeAdapter", "connectionString": "/var/lib/light.db" } }
/// }
/// ```
///
/// The connection members may also stand in `communication.binding.options` (Coaty JS 2.1's
/// `MqttBinding.withOptions({…})` layout; `tlsOptions` holds `ca`, `cert`, `key`,
/// `rejectUnauthorized` there), which wins over `communication` and
/// `communication.mqttClientOptions`. Two differences from MQTT.js: `ca`, `cert` and `key` are
/// **paths** of PEM files (MQTT.js takes the PEM text, which libmosquitto cannot), and a `will` is
/// ignored, as Coaty JS's MQTT binding ignores it: an agent's last will is always the Deadvertise
/// of its identity (and IO nodes). `communication.qos` (0 or 1) is CoatyKit's opt-in.
///
/// Failover brokers (``fallbackBrokerURLs``) come from MQTT.js's `servers`,
/// `[{ "host": "b", "port": 1883, "protocol": "mqtt" }]`, in any of those objects (the same
/// precedence), or from a comma-separated `COATY_BROKER`. `servers` lists every broker: without a
/// `brokerUrl` its first entry is the primary one, and an entry equal to `brokerUrl` is not repeated.
///
/// ``load(file:environment:)`` applies, from lowest to highest precedence: the defaults, the
/// file (`COATY_CONFIG` when no path is given), then the environment variables:
///
/// | variable | sets |
/// |---|---|
/// | `COATY_BROKER` | ``brokerURL``; a comma-separated list sets ``fallbackBrokerURLs`` too (the brokers after the first) |
/// | `COATY_NAMESPACE` | ``namespace`` |
/// | `COATY_CROSS_NAMESPACE` | ``shouldEnableCrossNamespacing`` (true/false, yes/no, on/off, 1/0) |
/// | `COATY_NAME`, `COATY_IDENTITY_ID` | ``name``, ``identityId`` |
/// | `COATY_QOS` | ``qos`` (0 or 1) |
/// | `COATY_BROKER_TYPE` | ``brokerType`` (`standard` or `rabbitmq`) |
/// | `COATY_USERNAME`, `COATY_PASSWORD` | ``username``, ``password`` |
/// | `COATY_KEEPALIVE` | ``keepAlive`` (seconds: 0, or 5…65535) |
/// | `COATY_MQTT_VERSION` | ``mqttProtocolVersion`` (4 or 3.1.1 for MQTT 3.1.1, 5 for MQTT 5) |
/// | `COATY_CA_FILE`, `COATY_CERT_FILE`, `COATY_KEY_FILE` | ``caFile``, ``certificateFile``, ``privateKeyFile`` (PEM) |
/// | `COATY_TLS_VERIFY` | ``verifiesServer`` (a boolean; only for tests) |
/// | `COATY_ENV`, `COATY_SERVICE_HOST` | ``agentInfo``'s build mode and service host (Coaty's variables) |
/// | `COATY_DATABASE_<NAME>` | ``databases``[`<NAME>`] from `postgres://…`, `sqlite:PATH` or `memory:` (replacing a database whose name differs only in case: `COATY_DATABASE_DB` sets `db`) |
///
/// Code may change the result afterwards (then call ``validate()``). Every problem is one
/// ``AgentConfigurationError`` naming the file and field, or the variable: the first one found.
public struct AgentConfiguration: Codable, Sendable, Hashable, CustomStringConvertible {
    /// The default broker URL.
    public static let defaultBrokerURL = "mqtt://127.0.0.1:1883"

    /// The name of the agent's identity. Default `Coaty Agent`.
    public var name: String
    /// The objectId of the agent's identity, or `nil` for a fresh one per ``makeIdentity()``.
    public var identityId: CoatyUUID?
    /// The broker, `mqtt://HOST[:PORT]` or `mqtts://HOST[:PORT]`. Default ``defaultBrokerURL``.
    public var brokerURL: String
    /// Brokers tried in order after ``brokerURL`` when it cannot be reached or its connection is lost (same scheme
    /// and credentials). JSON: `mqttClientOptions.servers` (read also from `communication` and
    /// `binding.options`), MQTT.js's `[{host, port, protocol}]`, which lists every broker (a server equal to
    /// `brokerUrl` is not repeated here); environment: the URLs after the first in a comma-separated
    /// `COATY_BROKER`. Default none.
    public var fallbackBrokerURLs: [String]
    /// The Coaty namespace. Default `-`.
    public var namespace: String
    /// Whether to receive events of every namespace. Default `false`.
    public var shouldEnableCrossNamespacing: Bool
    /// The offline queue size, or `nil` for ``CommunicationManager/Options``' default.
    public var deferredPublicationLimit: Int?
    /// The buffer size of each observer, or `nil` for ``CommunicationManager/Options``' default.
    public var observerBufferLimit: Int?
    /// The least MQTT QoS of the agent's publications and subscriptions (0 or 1), or `nil` for
    /// Coaty's QoS 0 (``CommunicationManager/Options/qos``). JSON: `communication.qos`.
    public var qos: Int?
    /// The kind of broker (``BrokerType``; default ``BrokerType/standard``): `rabbitmq` for
    /// RabbitMQ's MQTT plugin, which rewrites the dots in topics. JSON: `communication.brokerType`.
    public var brokerType: BrokerType = .standard
    /// The options of each controller under its ``Controller/name`` (handed to it as
    /// ``ControllerContext/options``).
    public var controllers: JSONObject
    /// The user name sent to the broker, or `nil`. JSON: `mqttClientOptions.username`.
    public var username: String?
    /// The password sent to the broker, or `nil`; never in ``description``. JSON:
    /// `mqttClientOptions.password`.
    public var password: String?
    /// The MQTT keep-alive interval in seconds: 0 (off) or 5…65535 (libmosquitto's range), or
    /// `nil` for Coaty's 60 s. JSON: `mqttClientOptions.keepalive`.
    public var keepAlive: Int?
    /// A PEM file with the CA certificates that signed the broker certificate (`mqtts://` only),
    /// or `nil` for the system CAs. JSON: `mqttClientOptions.ca`; environment: `COATY_CA_FILE`.
    public var caFile: String?
    /// A PEM client certificate for mutual TLS (with ``privateKeyFile``). JSON:
    /// `mqttClientOptions.cert`; environment: `COATY_CERT_FILE`.
    public var certificateFile: String?
    /// The PEM private key of ``certificateFile``. JSON: `mqttClientOptions.key`; environment:
    /// `COATY_KEY_FILE`.
    public var privateKeyFile: String?
    /// Whether an `mqtts://` broker's certificate and host name are verified (default `true`; turn
    /// it off only for tests). JSON: `mqttClientOptions.rejectUnauthorized`; environment:
    /// `COATY_TLS_VERIFY`.
    public var verifiesServer: Bool
    /// Package, build and configuration information (`common.agentInfo`), or `nil`; ``logHost``
    /// sends it with Log objects.
    public var agentInfo: AgentInfo?
    /// Application-specific values shared by the controllers (`common.extra`).
    public var extra: JSONObject
    /// The databases by name (`databases`).
    public var databases: [String: DatabaseOptions]
    /// The MQTT protocol version in MQTT.js's numbers: 4 (MQTT 3.1.1, Coaty's) or 5 (MQTT 5: requests carry their
    /// trace context in user properties, see `TracingRequests`), or `nil` for 4. MQTT 5 cannot keep a persistent
    /// session here (a durable recorder needs 4). JSON: `mqttClientOptions.protocolVersion`; environment:
    /// `COATY_MQTT_VERSION` (4, 3.1.1 or 5).
    public var mqttProtocolVersion: Int?

    /// Creates a configuration in code.
    /// - Parameters:
    ///   - name: the identity's name.
    ///   - identityId: the identity's objectId, or `nil` for a fresh one.
    ///   - brokerURL: the broker URL.
    ///   - fallbackBrokerURLs: the failover brokers, tried in order after `brokerURL`.
    ///   - namespace: the namespace.
    ///   - shouldEnableCrossNamespacing: whether to receive every namespace.
    ///   - deferredPublicationLimit: the offline queue size.
    ///   - observerBufferLimit: the observer buffer size.
    ///   - qos: the least QoS, 0 or 1 (`nil`: 0).
    ///   - controllers: controller options by controller name.
    ///   - username: the broker user name.
    ///   - password: the broker password.
    ///   - keepAlive: the keep-alive interval in seconds (`nil`: 60).
    ///   - caFile: a PEM CA file, or `nil` for the system CAs.
    ///   - certificateFile: a PEM client certificate.
    ///   - privateKeyFile: its PEM private key.
    ///   - verifiesServer: whether to verify the broker (default `true`).
    ///   - agentInfo: package, build and configuration information.
    ///   - extra: application-specific values.
    ///   - databases: the databases by name.
    public init(
        name: String = "Coaty Agent",
        identityId: CoatyUUID? = nil,
        brokerURL: String = Self.defaultBrokerURL,
        fallbackBrokerURLs: [String] = [],
        namespace: String = CoatyTopic.defaultNamespace,
        shouldEnableCrossNamespacing: Bool = false,
        deferredPublicationLimit: Int? = nil,
        observerBufferLimit: Int? = nil,
        qos: Int? = nil,
        controllers: JSONObject = [:],
        username: String? = nil,
        password: String? = nil,
        keepAlive: Int? = nil,
        caFile: String? = nil,
        certificateFile: String? = nil,
        privateKeyFile: String? = nil,
        verifiesServer: Bool = true,
        agentInfo: AgentInfo? = nil,
        extra: JSONObject = [:],
        databases: [String: DatabaseOptions] = [:]
    ) {
        self.qos = qos
        self.username = username
        self.password = password
        self.keepAlive = keepAlive
        self.caFile = caFile
        self.certificateFile = certificateFile
        self.privateKeyFile = privateKeyFile
        self.verifiesServer = verifiesServer
        self.agentInfo = agentInfo
        self.extra = extra
        self.databases = databases
        self.name = name
        self.identityId = identityId
        self.brokerURL = brokerURL
        self.fallbackBrokerURLs = fallbackBrokerURLs
        self.namespace = namespace
        self.shouldEnableCrossNamespacing = shouldEnableCrossNamespacing
        self.deferredPublicationLimit = deferredPublicationLimit
        self.observerBufferLimit = observerBufferLimit
        self.controllers = controllers
    }

    // MARK: Loading

    /// Loads a configuration: defaults, then the file, then the environment.
    ///
    /// - Parameters:
    ///   - file: a JSON file, or `nil` for `$COATY_CONFIG` (no file when that is unset too).
    ///   - environment: the environment variables; the process environment when `nil`.
    /// - Returns: the validated configuration.
    /// - Throws: ``AgentConfigurationError`` naming the file and field, or the variable.
    public static func load(
        file: String? = nil,
        environment: [String: String]? = nil
    ) throws(AgentConfigurationError) -> AgentConfiguration {
        let environment = environment ?? ProcessInfo.processInfo.environment
        var configuration = AgentConfiguration()
        let path = file ?? environment["COATY_CONFIG"]
        if let path { configuration = try AgentConfiguration(contentsOfFile: path) }
        try configuration.applyEnvironment(environment)
        if configuration.hasTLSOptions, !configuration.usesTLS {
            let fromEnvironment = environment["COATY_BROKER"] != nil
            throw AgentConfigurationError(
                source: fromEnvironment ? nil : path,
                field: fromEnvironment ? "COATY_BROKER" : "communication.brokerUrl",
                reason: Self.tlsWithoutMQTTS(configuration.brokerURL)
            )
        }
        return configuration
    }

    /// Reads a JSON configuration file.
    /// - Parameter path: the file.
    /// - Throws: ``AgentConfigurationError`` naming the file and the bad field.
    public init(contentsOfFile path: String) throws(AgentConfigurationError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw AgentConfigurationError(source: path, field: nil, reason: "cannot read the file")
        }
        let json: JSONValue
        do throws(JSONParseError) {
            json = try JSONValue(parsing: [UInt8](data))
        } catch {
            throw AgentConfigurationError(source: path, field: nil, reason: "not valid JSON: \(error)")
        }
        do {
            try self.init(json: json)
        } catch {
            var located = error
            located.source = path
            throw located
        }
    }

    /// Reads a configuration from JSON in Coaty JS's layout (see the type's description); absent
    /// members keep their defaults, and unknown members are ignored.
    /// - Parameter json: the configuration.
    /// - Throws: ``AgentConfigurationError`` naming the bad field.
    public init(json: JSONValue) throws(AgentConfigurationError) {
        self.init()
        let root = try ConfigurationReader.object(json, at: "")
        if let common = try ConfigurationReader.object(root, "common", at: "") {
            if let identity = try ConfigurationReader.object(common, "agentIdentity", at: "common") {
                let path = "common.agentIdentity"
                if let name = try ConfigurationReader.string(identity, "name", at: path) { self.name = name }
                if let id = try ConfigurationReader.string(identity, "objectId", at: path) {
                    identityId = try Self.identityId(id, field: path + ".objectId")
                }
            }
            if let info = common["agentInfo"], !info.isNull {
                agentInfo = try AgentInfo(json: info, at: "common.agentInfo")
            }
            if let extra = try ConfigurationReader.object(common, "extra", at: "common") { self.extra = extra }
        }
        if let communication = try ConfigurationReader.object(root, "communication", at: "") {
            let path = "communication"
            var brokers = BrokerList()
            _ = try readConnection(communication, at: path, brokers: &brokers)
            deferredPublicationLimit = try ConfigurationReader.count(
                communication,
                "deferredPublicationLimit",
                at: path
            )
            observerBufferLimit = try ConfigurationReader.count(communication, "observerBufferLimit", at: path)
            var tlsPath = path + ".mqttClientOptions"
            if let options = try ConfigurationReader.object(communication, "mqttClientOptions", at: path) {
                tlsPath = try readConnection(options, at: path + ".mqttClientOptions", brokers: &brokers) ?? tlsPath
            }
            if let binding = try ConfigurationReader.object(communication, "binding", at: path),
                let options = try ConfigurationReader.object(binding, "options", at: path + ".binding")
            {
                tlsPath = try readConnection(options, at: path + ".binding.options", brokers: &brokers) ?? tlsPath
            }
            resolveBrokers(brokers)
            try checkTLSPair(certificateField: tlsPath + ".cert", keyField: tlsPath + ".key")
        }
        if let controllers = try ConfigurationReader.object(root, "controllers", at: "") {
            for (name, options) in controllers where options.objectValue == nil {
                throw AgentConfigurationError(field: "controllers.\(name)", reason: "must be an object of options")
            }
            self.controllers = controllers
        }
        if let databases = try ConfigurationReader.object(root, "databases", at: "") {
            for (name, info) in databases {
                self.databases[name] = try DatabaseOptions(json: info, at: "databases.\(name)")
            }
        }
    }

    /// Applies the `COATY_*` environment variables over the current values.
    /// - Parameter environment: the variables.
    /// - Throws: ``AgentConfigurationError`` naming the variable.
    public mutating func applyEnvironment(_ environment: [String: String]) throws(AgentConfigurationError) {
        if let list = environment["COATY_BROKER"] {
            var urls = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            if urls.isEmpty { urls = [list] }  // reported as not a broker URL below
            for url in urls { _ = try Self.brokerURL(url, field: "COATY_BROKER") }
            brokerURL = urls[0]
            fallbackBrokerURLs = Array(urls.dropFirst())
        }
        if let namespace = environment["COATY_NAMESPACE"] {
            self.namespace = try Self.namespace(namespace, field: "COATY_NAMESPACE")
        }
        if let name = environment["COATY_NAME"] { self.name = name }
        if let id = environment["COATY_IDENTITY_ID"] {
            identityId = try Self.identityId(id, field: "COATY_IDENTITY_ID")
        }
        if let qos = environment["COATY_QOS"] {
            guard let level = Int(qos) else {
                throw AgentConfigurationError(field: "COATY_QOS", reason: "'\(qos)' is not 0 or 1")
            }
            self.qos = try Self.qos(level, field: "COATY_QOS")
        }
        if let type = environment["COATY_BROKER_TYPE"] {
            brokerType = try Self.brokerType(type, field: "COATY_BROKER_TYPE")
        }
        if let cross = environment["COATY_CROSS_NAMESPACE"] {
            shouldEnableCrossNamespacing = try ConfigurationReader.flag(cross, variable: "COATY_CROSS_NAMESPACE")
        }
        try applyConnectionEnvironment(environment)
        if environment["COATY_ENV"] != nil || environment["COATY_SERVICE_HOST"] != nil {
            var info = agentInfo ?? AgentInfo.current(environment: environment)
            if let mode = environment["COATY_ENV"] { info.buildInfo.buildMode = mode }
            if let host = environment["COATY_SERVICE_HOST"] { info.configInfo.serviceHost = host }
            agentInfo = info
        }
        let prefix = "COATY_DATABASE_"
        for (variable, url) in environment.sorted(by: { $0.key < $1.key })
        where variable.hasPrefix(prefix) && variable.count > prefix.count {
            // Variables are named in capitals: COATY_DATABASE_DB replaces the database `db`.
            let name = String(variable.dropFirst(prefix.count))
            let key = databases.keys.first { $0 != name && $0.lowercased() == name.lowercased() } ?? name
            databases[key] = try DatabaseOptions(url: url, field: variable)
        }
    }

    /// Checks every field (as loading does); use it after changing a configuration in code.
    /// - Throws: ``AgentConfigurationError`` naming the bad field.
    public func validate() throws(AgentConfigurationError) {
        _ = try Self.brokerURL(brokerURL, field: "brokerURL")
        for url in fallbackBrokerURLs { _ = try Self.brokerURL(url, field: "fallbackBrokerURLs") }
        _ = try Self.namespace(namespace, field: "namespace")
        if let identityId { _ = try Self.identityId(identityId.uuidString, field: "identityId") }
        if let qos { _ = try Self.qos(qos, field: "qos") }
        if let keepAlive { _ = try Self.keepAlive(keepAlive, field: "keepAlive") }
        if let mqttProtocolVersion {
            _ = try Self.mqttProtocolVersion(mqttProtocolVersion, field: "mqttProtocolVersion")
        }
        if let caFile { _ = try ConfigurationReader.pemFile(caFile, field: "caFile") }
        if let certificateFile { _ = try ConfigurationReader.pemFile(certificateFile, field: "certificateFile") }
        if let privateKeyFile { _ = try ConfigurationReader.pemFile(privateKeyFile, field: "privateKeyFile") }
        try checkTLSPair(certificateField: "certificateFile", keyField: "privateKeyFile")
        if hasTLSOptions, !usesTLS {
            throw AgentConfigurationError(field: "brokerURL", reason: Self.tlsWithoutMQTTS(brokerURL))
        }
        for (name, database) in databases where database.adapter.isEmpty {
            throw AgentConfigurationError(field: "databases.\(name).adapter", reason: "is empty; name the adapter")
        }
    }

    /// Whether ``brokerURL`` is an `mqtts://` URL (TLS).
    public var usesTLS: Bool { brokerURL.lowercased().hasPrefix("mqtts://") }

    /// Host information for the Log objects of this agent, with ``agentInfo`` as
    /// `logHost.agentInfo` (Coaty JS's controllers send `common.agentInfo` so), the process id and
    /// the host name; hand it to ``CoatyLogPublisher`` or
    /// ``CommunicationManager/publishLog(_:_:tags:labels:host:name:)``.
    public var logHost: LogHost { .currentProcess(agentInfo: agentInfo?.json) }

    /// The configuration in Coaty JS's layout with the password replaced by `***`.
    public var description: String {
        var redacted = self
        if redacted.password != nil { redacted.password = "***" }
        return "AgentConfiguration(\(redacted.json))"
    }

    // MARK: Mapping onto the communication manager

    /// The identity: ``name``, and ``identityId`` or a fresh id.
    /// - Returns: the identity.
    public func makeIdentity() -> Identity {
        Identity(objectId: identityId ?? CoatyUUID(), name: name)
    }

    /// The communication manager options: namespace, cross-namespacing and the limits given.
    public var communicationOptions: CommunicationManager.Options {
        var options = CommunicationManager.Options(
            namespace: namespace,
            crossNamespacing: shouldEnableCrossNamespacing
        )
        if let deferredPublicationLimit { options.deferredPublicationLimit = deferredPublicationLimit }
        if let observerBufferLimit { options.observerBufferLimit = observerBufferLimit }
        if qos == 1 { options.qos = .atLeastOnce }
        options.brokerType = brokerType
        return options
    }

    /// Creates a communication manager with this configuration's identity and options over a
    /// transport (the ``brokerURL`` is the transport's business: CoatyKit's
    /// `CommunicationManager.mqtt(configuration:)` uses it).
    ///
    /// - Parameters:
    ///   - transport: the transport.
    ///   - registry: the object types to decode into Swift types.
    ///   - logger: the manager's logger.
    ///   - metricsFactory: the metrics factory, or `nil` for the global one.
    /// - Returns: the manager, not started.
    /// - Throws: ``CommunicationError`` for an invalid namespace.
    public func makeCommunicationManager(
        transport: any CoatyTransport,
        registry: CoatyObjectRegistry = CoatyObjectRegistry(),
        logger: Logger = Logger(label: "coaty.communication", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws(CommunicationError) -> CommunicationManager {
        try CommunicationManager(
            transport: transport,
            identity: makeIdentity(),
            registry: registry,
            options: communicationOptions,
            logger: logger,
            metricsFactory: metricsFactory
        )
    }

    // MARK: Codable

    /// Decodes the Coaty JS layout (see ``init(json:)``).
    /// - Parameter decoder: the decoder.
    /// - Throws: ``AgentConfigurationError`` or the decoder's errors.
    public init(from decoder: any Decoder) throws {
        try self.init(json: JSONValue(from: decoder))
    }

    /// Encodes the Coaty JS layout.
    /// - Parameter encoder: the encoder.
    /// - Throws: the encoder's errors.
    public func encode(to encoder: any Encoder) throws {
        try json.encode(to: encoder)
    }

    /// The configuration as JSON in Coaty JS's layout; absent optional values are left out.
    public var json: JSONValue {
        var identity: JSONObject = ["name": .string(name)]
        if let identityId { identity["objectId"] = .string(identityId.uuidString) }
        var communication: JSONObject = [
            "brokerUrl": .string(brokerURL),
            "namespace": .string(namespace),
            "shouldEnableCrossNamespacing": .bool(shouldEnableCrossNamespacing),
        ]
        if let deferredPublicationLimit {
            communication["deferredPublicationLimit"] = .int(Int64(deferredPublicationLimit))
        }
        if let observerBufferLimit { communication["observerBufferLimit"] = .int(Int64(observerBufferLimit)) }
        if let qos { communication["qos"] = .int(Int64(qos)) }
        if brokerType != .standard { communication["brokerType"] = .string(brokerType.rawValue) }
        let clientOptions = mqttClientOptionsJSON
        if !clientOptions.isEmpty { communication["mqttClientOptions"] = .object(clientOptions) }
        var common: JSONObject = ["agentIdentity": .object(identity)]
        if let agentInfo { common["agentInfo"] = agentInfo.json }
        if !extra.isEmpty { common["extra"] = .object(extra) }
        var root: JSONObject = [
            "common": .object(common),
            "communication": .object(communication),
            "controllers": .object(controllers),
        ]
        if !databases.isEmpty {
            root["databases"] = .object(
                JSONObject(databases.sorted { $0.key < $1.key }.map { ($0.key, $0.value.json) })
            )
        }
        return .object(root)
    }

    // MARK: Field checks

    /// A QoS level the agent supports: 0 or 1.
    static func brokerType(_ name: String, field: String) throws(AgentConfigurationError) -> BrokerType {
        guard let type = BrokerType(name: name) else {
            let names = BrokerType.allCases.map(\.rawValue).joined(separator: " or ")
            throw AgentConfigurationError(
                field: field,
                reason: "'\(name.prefix(80))' is not a broker type; use \(names)"
            )
        }
        return type
    }

    static func qos(_ level: Int, field: String) throws(AgentConfigurationError) -> Int {
        guard level == 0 || level == 1 else {
            throw AgentConfigurationError(field: field, reason: "must be 0 or 1 (QoS 2 is not supported), not \(level)")
        }
        return level
    }

    static func brokerURL(_ url: String, field: String) throws(AgentConfigurationError) -> String {
        let parts = url.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, ["mqtt", "mqtts"].contains(parts[0].lowercased()) else {
            throw AgentConfigurationError(
                field: field,
                reason: "'\(url)' is not a broker URL; use mqtt://HOST[:PORT] or mqtts://HOST[:PORT]"
            )
        }
        let authority = parts[1].split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let hostPort = authority.split(separator: "@").last.map(String.init) ?? ""
        var host = Substring(hostPort)
        if let colon = hostPort.lastIndex(of: ":"), !hostPort.hasSuffix("]") {
            host = hostPort[..<colon]
            guard let port = Int(hostPort[hostPort.index(after: colon)...]), (1...65_535).contains(port) else {
                throw AgentConfigurationError(field: field, reason: "'\(url)' has an invalid port; use 1…65535")
            }
        }
        guard !host.isEmpty else {
            throw AgentConfigurationError(field: field, reason: "'\(url)' has no host; use mqtt://HOST[:PORT]")
        }
        return url
    }

    static func namespace(_ namespace: String, field: String) throws(AgentConfigurationError) -> String {
        do throws(CoatyTopicError) {
            _ = try CoatyTopic.subscriptionFilter(for: .discover, namespace: namespace)
        } catch {
            throw AgentConfigurationError(
                field: field,
                reason: "'\(namespace)' is not a valid namespace; use characters A-Z a-z 0-9 . - _ only"
            )
        }
        return namespace
    }

    static func identityId(_ text: String, field: String) throws(AgentConfigurationError) -> CoatyUUID {
        guard let id = CoatyUUID(text.lowercased()),
            (try? CoatyTopic(event: .deadvertise, namespace: CoatyTopic.defaultNamespace, sourceId: id)) != nil
        else {
            throw AgentConfigurationError(field: field, reason: "'\(text)' is not a version 4 UUID")
        }
        return id
    }
}
