public import CoatyCore
import CoatyMQTT
public import Logging
public import Metrics

extension CommunicationManager {
    /// A communication manager over MQTT from an agent configuration: its broker URL (and failover brokers), identity,
    /// namespace, cross-namespacing and limits.
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
            configuration: try MQTTConfiguration.coaty(
                urls: [configuration.brokerURL] + configuration.fallbackBrokerURLs,
                identityId: identity.objectId
            ),
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
