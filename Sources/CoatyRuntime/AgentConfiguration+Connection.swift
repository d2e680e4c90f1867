// Reading the broker connection of an agent configuration: URL, failover brokers, namespace, QoS,
// credentials, keep-alive and TLS, from the JSON layouts of Coaty JS 2.4 and from `COATY_*` variables.

import CoatyCommunication
import CoatyFilter
import CoatyModel

extension AgentConfiguration {
    /// The brokers named by the objects of the Coaty JS layout read so far (a later object wins),
    /// applied by ``resolveBrokers(_:)`` once all are read.
    struct BrokerList {
        /// Whether some object gave a `brokerUrl` (then ``brokerURL`` holds the winning one).
        var hasPrimary = false
        /// The URLs of the winning MQTT.js `servers` list, or `nil` when none was given.
        var servers: [String]?
    }

    /// Reads the connection members of one object of the Coaty JS layout: `communication`,
    /// `communication.mqttClientOptions` or `communication.binding.options` (MQTT.js's option names;
    /// `tlsOptions` is read as in the MQTT binding, whose members override the outer ones). The
    /// broker members, `brokerUrl` and `servers`, are collected in `brokers`.
    /// - Returns: the path of the object that gave a client certificate or key, if any.
    mutating func readConnection(
        _ object: JSONObject,
        at path: String,
        brokers: inout BrokerList
    ) throws(AgentConfigurationError) -> String? {
        typealias Reader = ConfigurationReader
        if let url = try Reader.string(object, "brokerUrl", at: path) {
            brokerURL = try Self.brokerURL(url, field: Reader.path(path, "brokerUrl"))
            brokers.hasPrimary = true
        }
        if let servers = try Self.servers(object, at: path) { brokers.servers = servers }
        if let namespace = try Reader.string(object, "namespace", at: path) {
            self.namespace = try Self.namespace(namespace, field: Reader.path(path, "namespace"))
        }
        if let cross = try Reader.bool(object, "shouldEnableCrossNamespacing", at: path) {
            shouldEnableCrossNamespacing = cross
        }
        if let qos = try Reader.count(object, "qos", at: path) {
            self.qos = try Self.qos(qos, field: Reader.path(path, "qos"))
        }
        if let type = try Reader.string(object, "brokerType", at: path) {
            brokerType = try Self.brokerType(type, field: Reader.path(path, "brokerType"))
        }
        if let username = try Reader.string(object, "username", at: path) { self.username = username }
        if let password = try Reader.string(object, "password", at: path) { self.password = password }
        if let keepAlive = try Reader.count(object, "keepalive", at: path) {
            self.keepAlive = try Self.keepAlive(keepAlive, field: Reader.path(path, "keepalive"))
        }
        if let version = try Reader.count(object, "protocolVersion", at: path) {
            mqttProtocolVersion = try Self.mqttProtocolVersion(version, field: Reader.path(path, "protocolVersion"))
        }
        var keyPath = try readTLS(object, at: path)
        if let tlsOptions = try Reader.object(object, "tlsOptions", at: path) {
            keyPath = try readTLS(tlsOptions, at: Reader.path(path, "tlsOptions")) ?? keyPath
        }
        return keyPath
    }

    /// Sets ``fallbackBrokerURLs`` (and, without a `brokerUrl`, ``brokerURL``) from a `servers` list:
    /// `brokerUrl` is the primary broker, else the first server; a server equal to the primary one is
    /// not repeated among the fallbacks. Without a `servers` list both stay as they are.
    mutating func resolveBrokers(_ brokers: BrokerList) {
        guard var servers = brokers.servers else { return }
        if !brokers.hasPrimary, !servers.isEmpty { brokerURL = servers.removeFirst() }
        let primaryKey = Self.brokerKey(brokerURL)
        fallbackBrokerURLs = servers.filter { Self.brokerKey($0) != primaryKey }
    }

    /// The broker URLs of MQTT.js's `servers` (`[{host, port, protocol}]`) in `object`, or `nil`
    /// when it has none.
    private static func servers(_ object: JSONObject, at path: String) throws(AgentConfigurationError) -> [String]? {
        let serversPath = ConfigurationReader.path(path, "servers")
        guard let value = object["servers"], !value.isNull else { return nil }
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

    /// Reads `ca`, `cert`, `key` (PEM file paths) and `rejectUnauthorized`.
    /// - Returns: `path` when it gave a client certificate or key.
    private mutating func readTLS(_ object: JSONObject, at path: String) throws(AgentConfigurationError) -> String? {
        typealias Reader = ConfigurationReader
        if let ca = try Reader.string(object, "ca", at: path) {
            caFile = try Reader.pemFile(ca, field: Reader.path(path, "ca"))
        }
        let certificate = try Reader.string(object, "cert", at: path)
        if let certificate { certificateFile = try Reader.pemFile(certificate, field: Reader.path(path, "cert")) }
        let key = try Reader.string(object, "key", at: path)
        if let key { privateKeyFile = try Reader.pemFile(key, field: Reader.path(path, "key")) }
        if let reject = try Reader.bool(object, "rejectUnauthorized", at: path) { verifiesServer = reject }
        return certificate != nil || key != nil ? path : nil
    }

    /// Applies `COATY_USERNAME`, `COATY_PASSWORD`, `COATY_KEEPALIVE`, `COATY_MQTT_VERSION`, `COATY_CA_FILE`,
    /// `COATY_CERT_FILE`, `COATY_KEY_FILE` and `COATY_TLS_VERIFY`.
    mutating func applyConnectionEnvironment(_ environment: [String: String]) throws(AgentConfigurationError) {
        if let username = environment["COATY_USERNAME"] { self.username = username }
        if let password = environment["COATY_PASSWORD"] { self.password = password }
        if let text = environment["COATY_KEEPALIVE"] {
            let seconds = try ConfigurationReader.count(text, variable: "COATY_KEEPALIVE")
            keepAlive = try Self.keepAlive(seconds, field: "COATY_KEEPALIVE")
        }
        if let text = environment["COATY_MQTT_VERSION"] {
            switch text {
            case "4", "3.1.1": mqttProtocolVersion = 4
            case "5": mqttProtocolVersion = 5
            default:
                throw AgentConfigurationError(
                    field: "COATY_MQTT_VERSION",
                    reason: "must be 4 (or 3.1.1) for MQTT 3.1.1 or 5 for MQTT 5, not '\(text.prefix(40))'"
                )
            }
        }
        if let file = environment["COATY_CA_FILE"] {
            caFile = try ConfigurationReader.pemFile(file, field: "COATY_CA_FILE")
        }
        if let file = environment["COATY_CERT_FILE"] {
            certificateFile = try ConfigurationReader.pemFile(file, field: "COATY_CERT_FILE")
        }
        if let file = environment["COATY_KEY_FILE"] {
            privateKeyFile = try ConfigurationReader.pemFile(file, field: "COATY_KEY_FILE")
        }
        if let verify = environment["COATY_TLS_VERIFY"] {
            verifiesServer = try ConfigurationReader.flag(verify, variable: "COATY_TLS_VERIFY")
        }
        try checkTLSPair(certificateField: "COATY_CERT_FILE", keyField: "COATY_KEY_FILE")
    }

    /// Throws when only one of the client certificate and its key is set, naming the missing one.
    func checkTLSPair(certificateField: String, keyField: String) throws(AgentConfigurationError) {
        guard (certificateFile == nil) != (privateKeyFile == nil) else { return }
        let missing = certificateFile == nil ? certificateField : keyField
        throw AgentConfigurationError(
            field: missing,
            reason: "is missing; a client certificate and its private key go together"
        )
    }

    /// The members of `mqttClientOptions` this configuration writes: failover brokers (`servers`,
    /// listing ``brokerURL`` first), credentials, keep-alive, TLS.
    var mqttClientOptionsJSON: JSONObject {
        var options: JSONObject = [:]
        if !fallbackBrokerURLs.isEmpty {
            let servers = ([brokerURL] + fallbackBrokerURLs).compactMap { Self.server($0) }
            options["servers"] = .array(servers.map { .object($0) })
        }
        if let username { options["username"] = .string(username) }
        if let password { options["password"] = .string(password) }
        if let keepAlive { options["keepalive"] = .int(Int64(keepAlive)) }
        if let mqttProtocolVersion { options["protocolVersion"] = .int(Int64(mqttProtocolVersion)) }
        if let caFile { options["ca"] = .string(caFile) }
        if let certificateFile { options["cert"] = .string(certificateFile) }
        if let privateKeyFile { options["key"] = .string(privateKeyFile) }
        if !verifiesServer { options["rejectUnauthorized"] = false }
        return options
    }

    /// Whether any TLS option differs from the default (system CAs, no client certificate, verified).
    public var hasTLSOptions: Bool {
        caFile != nil || certificateFile != nil || privateKeyFile != nil || !verifiesServer
    }

    /// An MQTT protocol version in MQTT.js's numbers that CoatyKit speaks: 4 (MQTT 3.1.1) or 5.
    static func mqttProtocolVersion(_ version: Int, field: String) throws(AgentConfigurationError) -> Int {
        guard version == 4 || version == 5 else {
            throw AgentConfigurationError(
                field: field,
                reason: "must be 4 (MQTT 3.1.1) or 5 (MQTT 5), not \(version)"
            )
        }
        return version
    }

    /// A keep-alive interval libmosquitto accepts: 0 (off) or 5…65535 seconds.
    static func keepAlive(_ seconds: Int, field: String) throws(AgentConfigurationError) -> Int {
        guard seconds == 0 || (5...65_535).contains(seconds) else {
            throw AgentConfigurationError(
                field: field,
                reason: "must be 0 (off) or 5…65535 seconds, not \(seconds)"
            )
        }
        return seconds
    }

    /// The reason for TLS files with a plain `mqtt://` broker URL.
    static func tlsWithoutMQTTS(_ url: String) -> String {
        "'\(url)' is not an mqtts:// URL, but TLS options (ca, cert, key, rejectUnauthorized) are set; "
            + "use mqtts://HOST[:PORT] or remove them"
    }
}
