public import CoatyCore
public import Logging
public import Metrics

extension CommunicationManager {
    /// A communication manager over MQTT from an agent configuration: its broker URL, identity,
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
        try mqtt(
            url: configuration.brokerURL,
            identity: configuration.makeIdentity(),
            registry: registry,
            options: configuration.communicationOptions,
            logger: logger,
            metricsFactory: metricsFactory
        )
    }
}
