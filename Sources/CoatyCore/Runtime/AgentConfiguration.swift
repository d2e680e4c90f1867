import Foundation
public import Logging
public import Metrics

/// An agent's configuration: identity, broker, namespace and the options of its controllers,
/// from code, a JSON file in Coaty JS's layout, and `COATY_*` environment variables.
///
/// ```json
/// {
///   "common": { "agentIdentity": { "name": "Light agent", "objectId": "…" } },
///   "communication": { "brokerUrl": "mqtt://broker:1883", "namespace": "home", "shouldEnableCrossNamespacing": false },
///   "controllers": { "LightController": { "room": "kitchen" } }
/// }
/// ```
///
/// Failover brokers come from `communication.servers` (or `communication.mqttClientOptions.servers`), MQTT.js's
/// `[{ "host": "b", "port": 1883, "protocol": "mqtt" }]`, or from a comma-separated `COATY_BROKER`.
///
/// ``load(file:environment:)`` applies, from lowest to highest precedence: the defaults, the
/// file (`COATY_CONFIG` when no path is given), then the environment variables `COATY_BROKER`,
/// `COATY_NAMESPACE`, `COATY_NAME`, `COATY_IDENTITY_ID`, `COATY_CROSS_NAMESPACE` and `COATY_QOS`. Code may
/// change the result afterwards. Every problem is an ``AgentConfigurationError`` naming the
/// file and field, or the variable.
public struct AgentConfiguration: Codable, Sendable, Hashable {
    /// The default broker URL.
    public static let defaultBrokerURL = "mqtt://127.0.0.1:1883"

    /// The name of the agent's identity. Default `Coaty Agent`.
    public var name: String
    /// The objectId of the agent's identity, or `nil` for a fresh one per ``makeIdentity()``.
    public var identityId: CoatyUUID?
    /// The broker, `mqtt://HOST[:PORT]` or `mqtts://HOST[:PORT]`. Default ``defaultBrokerURL``.
    public var brokerURL: String
    /// Brokers tried in order after ``brokerURL`` when it cannot be reached or its connection is lost (same scheme
    /// and credentials). JSON: `communication.servers`, MQTT.js's `[{host, port, protocol}]`, which lists every
    /// broker (a server equal to `brokerUrl` is not repeated here). Default none.
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
    /// The options of each controller under its ``Controller/name`` (handed to it as
    /// ``ControllerContext/options``).
    public var controllers: JSONObject

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
        controllers: JSONObject = [:]
    ) {
        self.qos = qos
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
        if let path = file ?? environment["COATY_CONFIG"] {
            configuration = try AgentConfiguration(contentsOfFile: path)
        }
        try configuration.applyEnvironment(environment)
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
        }
        if let communication = try ConfigurationReader.object(root, "communication", at: "") {
            let path = "communication"
            let primary = try ConfigurationReader.string(communication, "brokerUrl", at: path)
            if let primary { brokerURL = try Self.brokerURL(primary, field: path + ".brokerUrl") }
            var servers = try Self.servers(communication, at: path)
            if primary == nil, !servers.isEmpty { brokerURL = servers.removeFirst() }
            let primaryKey = Self.brokerKey(brokerURL)
            fallbackBrokerURLs = servers.filter { Self.brokerKey($0) != primaryKey }
            if let namespace = try ConfigurationReader.string(communication, "namespace", at: path) {
                self.namespace = try Self.namespace(namespace, field: path + ".namespace")
            }
            if let cross = try ConfigurationReader.bool(communication, "shouldEnableCrossNamespacing", at: path) {
                shouldEnableCrossNamespacing = cross
            }
            deferredPublicationLimit = try ConfigurationReader.count(
                communication,
                "deferredPublicationLimit",
                at: path
            )
            observerBufferLimit = try ConfigurationReader.count(communication, "observerBufferLimit", at: path)
            if let qos = try ConfigurationReader.count(communication, "qos", at: path) {
                self.qos = try Self.qos(qos, field: path + ".qos")
            }
        }
        if let controllers = try ConfigurationReader.object(root, "controllers", at: "") {
            for (name, options) in controllers where options.objectValue == nil {
                throw AgentConfigurationError(field: "controllers.\(name)", reason: "must be an object of options")
            }
            self.controllers = controllers
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
        if let cross = environment["COATY_CROSS_NAMESPACE"] {
            switch cross.lowercased() {
            case "1", "true", "yes", "on": shouldEnableCrossNamespacing = true
            case "0", "false", "no", "off", "": shouldEnableCrossNamespacing = false
            default:
                throw AgentConfigurationError(
                    field: "COATY_CROSS_NAMESPACE",
                    reason: "'\(cross)' is not a boolean; use true/false, yes/no, on/off or 1/0"
                )
            }
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
        if !fallbackBrokerURLs.isEmpty {
            let servers = ([brokerURL] + fallbackBrokerURLs).compactMap { Self.server($0) }
            communication["servers"] = .array(servers.map { .object($0) })
        }
        return [
            "common": ["agentIdentity": .object(identity)],
            "communication": .object(communication),
            "controllers": .object(controllers),
        ]
    }

    // MARK: Field checks

    /// A QoS level the agent supports: 0 or 1.
    static func qos(_ level: Int, field: String) throws(AgentConfigurationError) -> Int {
        guard level == 0 || level == 1 else {
            throw AgentConfigurationError(field: field, reason: "must be 0 or 1 (QoS 2 is not supported), not \(level)")
        }
        return level
    }

    /// The broker URLs of MQTT.js's `servers` (`[{host, port, protocol}]`) under `communication` or
    /// `communication.mqttClientOptions`.
    private static func servers(_ communication: JSONObject, at path: String) throws(AgentConfigurationError)
        -> [String]
    {
        var parent = communication
        var serversPath = ConfigurationReader.path(path, "servers")
        if communication["servers"] == nil,
            let options = try ConfigurationReader.object(communication, "mqttClientOptions", at: path)
        {
            parent = options
            serversPath = ConfigurationReader.path(path, "mqttClientOptions.servers")
        }
        guard let value = parent["servers"] else { return [] }
        guard case .array(let entries) = value else {
            throw AgentConfigurationError(field: serversPath, reason: "must be an array of {host, port, protocol}")
        }
        var urls: [String] = []
        for (index, entry) in entries.enumerated() {
            let field = "\(serversPath)[\(index)]"
            let server = try ConfigurationReader.object(entry, at: field)
            guard let host = try ConfigurationReader.string(server, "host", at: field), !host.isEmpty else {
                throw AgentConfigurationError(field: field + ".host", reason: "is missing; give the broker's host")
            }
            let scheme = (try ConfigurationReader.string(server, "protocol", at: field) ?? "mqtt").lowercased()
            let hostPart = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
            var url = "\(scheme)://\(hostPart)"
            if let port = try ConfigurationReader.count(server, "port", at: field) { url += ":\(port)" }
            urls.append(try brokerURL(url, field: field))
        }
        return urls
    }

    /// `scheme://host:port` of a broker URL (default ports filled in), to tell whether two URLs name one broker.
    private static func brokerKey(_ url: String) -> String {
        guard let server = server(url), case .string(let scheme) = server["protocol"],
            case .string(let host) = server["host"], case .int(let port) = server["port"]
        else { return url }
        return "\(scheme)://\(host):\(port)"
    }

    /// MQTT.js's `{host, port, protocol}` of a valid broker URL (credentials and path left out).
    private static func server(_ url: String) -> JSONObject? {
        let parts = url.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let scheme = parts[0].lowercased()
        let authority = parts[1].split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let hostPort = authority.split(separator: "@").last.map(String.init) ?? ""
        var host = Substring(hostPort)
        var port = scheme == "mqtts" ? 8883 : 1883
        if let colon = hostPort.lastIndex(of: ":"), !hostPort.hasSuffix("]"),
            let value = Int(hostPort[hostPort.index(after: colon)...])
        {
            host = hostPort[..<colon]
            port = value
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        return ["host": .string(String(host)), "port": .int(Int64(port)), "protocol": .string(scheme)]
    }

    private static func brokerURL(_ url: String, field: String) throws(AgentConfigurationError) -> String {
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

    private static func namespace(_ namespace: String, field: String) throws(AgentConfigurationError) -> String {
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

    private static func identityId(_ text: String, field: String) throws(AgentConfigurationError) -> CoatyUUID {
        guard let id = CoatyUUID(text.lowercased()),
            (try? CoatyTopic(event: .deadvertise, namespace: CoatyTopic.defaultNamespace, sourceId: id)) != nil
        else {
            throw AgentConfigurationError(field: field, reason: "'\(text)' is not a version 4 UUID")
        }
        return id
    }
}

/// A configuration problem, naming where it is: the file and field (`communication.namespace`)
/// or the environment variable (`COATY_NAMESPACE`).
public struct AgentConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file, when the problem is in one.
    public var source: String?
    /// The field path or environment variable, or `nil` for a problem with the whole file.
    public var field: String?
    /// What is wrong and what to do.
    public var reason: String

    /// Creates an error.
    /// - Parameters:
    ///   - source: the file.
    ///   - field: the field path or environment variable.
    ///   - reason: what is wrong.
    public init(source: String? = nil, field: String?, reason: String) {
        self.source = source
        self.field = field
        self.reason = reason
    }

    /// `file: field: reason`, leaving out what is unknown.
    public var description: String {
        [source, field, reason].compactMap { $0 }.joined(separator: ": ")
    }
}

/// Typed reads of configuration members with errors that name the field.
enum ConfigurationReader {
    static func path(_ parent: String, _ key: String) -> String { parent.isEmpty ? key : parent + "." + key }

    static func object(_ value: JSONValue, at path: String) throws(AgentConfigurationError) -> JSONObject {
        guard let object = value.objectValue else {
            throw AgentConfigurationError(field: path.isEmpty ? nil : path, reason: "must be a JSON object")
        }
        return object
    }

    static func object(_ parent: JSONObject, _ key: String, at path: String) throws(AgentConfigurationError)
        -> JSONObject?
    {
        guard let value = parent[key], !value.isNull else { return nil }
        return try object(value, at: Self.path(path, key))
    }

    static func string(_ parent: JSONObject, _ key: String, at path: String) throws(AgentConfigurationError)
        -> String?
    {
        guard let value = parent[key], !value.isNull else { return nil }
        guard let string = value.stringValue else {
            throw AgentConfigurationError(field: Self.path(path, key), reason: "must be a string, not \(value)")
        }
        return string
    }

    static func bool(_ parent: JSONObject, _ key: String, at path: String) throws(AgentConfigurationError) -> Bool? {
        guard let value = parent[key], !value.isNull else { return nil }
        guard let bool = value.boolValue else {
            throw AgentConfigurationError(field: Self.path(path, key), reason: "must be true or false, not \(value)")
        }
        return bool
    }

    static func count(_ parent: JSONObject, _ key: String, at path: String) throws(AgentConfigurationError) -> Int? {
        guard let value = parent[key], !value.isNull else { return nil }
        guard let count = value.intValue, count >= 0 else {
            throw AgentConfigurationError(
                field: Self.path(path, key),
                reason: "must be a whole number of at least 0, not \(value)"
            )
        }
        return count
    }
}
