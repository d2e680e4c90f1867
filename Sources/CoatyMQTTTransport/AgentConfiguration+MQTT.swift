public import CoatyMQTT
public import CoatyCommunication
public import CoatyModel
public import CoatyRuntime
public import Logging
public import Metrics

extension CommunicationManager {
    /// A communication manager over MQTT from an agent configuration: its broker URL (and failover
    /// brokers), credentials, keep-alive, TLS files, identity, namespace, cross-namespacing, QoS and
    /// limits (see `MQTTConfiguration.coaty(configuration:identityId:)`).
    ///
    /// ```swift
    /// let configuration = try AgentConfiguration.load(file: "agent.json")
    /// let manager = try CommunicationManager.mqtt(configuration: configuration)
    /// ```
    ///
    /// - Parameters:
    ///   - configuration: the configuration.
    ///   - registry: the object types to decode into Swift types.
    ///   - logger: the logger of the manager and the MQTT client.
    ///   - metricsFactory: the metrics factory, or `nil` for the global one.
    /// - Returns: the manager, not started.
    /// - Throws: `MQTTError` for a malformed URL, ``CommunicationError`` for an invalid namespace.
    public static func mqtt(
        configuration: AgentConfiguration,
        registry: CoatyObjectRegistry = CoatyObjectRegistry(),
        logger: Logger = Logger(label: "coaty.communication", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws -> CommunicationManager {
        let identity = configuration.makeIdentity()
        let transport = MQTTTransport(
            configuration: try MQTTConfiguration.coaty(configuration: configuration, identityId: identity.objectId),
            logger: logger,
            metricsFactory: metricsFactory
        )
        return try CommunicationManager(
            transport: transport,
            identity: identity,
            registry: registry,
            options: configuration.communicationOptions,
            logger: logger,
            metricsFactory: metricsFactory
        )
    }
}

extension MQTTConfiguration {
    /// The MQTT client configuration of an agent: the Coaty defaults of
    /// ``coaty(urls:identityId:)`` with the configuration's broker URL and its failover brokers
    /// (`fallbackBrokerURLs`, as `fallbackBrokers`), user name and password (over any given in the
    /// URL), keep-alive (`nil`: 60 s), protocol version (`mqttProtocolVersion` 5: MQTT 5) and, for an `mqtts://` URL, its TLS files and verification
    /// (used for every broker). The last will is not configurable: the communication manager sets
    /// Coaty's (the Deadvertise of the identity and IO nodes).
    ///
    /// - Parameters:
    ///   - configuration: the agent configuration.
    ///   - identityId: the identity's objectId; it determines the client id.
    /// - Returns: the MQTT configuration.
    /// - Throws: `MQTTError` of kind `.invalidConfiguration` for a malformed URL, or failover brokers
    ///   whose scheme (or credentials) differ from the primary broker's.
    public static func coaty(configuration: AgentConfiguration, identityId: CoatyUUID) throws -> MQTTConfiguration {
        var mqtt = try coaty(
            urls: [configuration.brokerURL] + configuration.fallbackBrokerURLs,
            identityId: identityId
        )
        if let username = configuration.username { mqtt.username = username }
        if let password = configuration.password { mqtt.password = password }
        if let keepAlive = configuration.keepAlive { mqtt.keepAlive = .seconds(keepAlive) }
        if configuration.mqttProtocolVersion == 5 { mqtt.protocolVersion = .v5 }
        if mqtt.tls != nil {
            mqtt.tls = MQTTTLSConfiguration(
                caFile: configuration.caFile,
                certificateFile: configuration.certificateFile,
                privateKeyFile: configuration.privateKeyFile,
                verifyServer: configuration.verifiesServer
            )
        }
        return mqtt
    }
}
