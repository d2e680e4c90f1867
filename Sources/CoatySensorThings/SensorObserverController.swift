public import CoatyCore

/// Observes sensors and their observations; Coaty JS's `SensorObserverController`, the
/// counterpart of ``SensorSourceController``.
///
/// ```swift
/// let observer = SensorObserverController(communicationManager: manager)
/// for try await sensor in observer.discoverSensors().responses(timeout: .seconds(2)) {
///     for await observation in try observer.observeChanneledObservations(sensorId: sensor.objectId) {
///         print(sensor.name, observation.result)
///     }
/// }
/// ```
///
/// Nothing is cached: every call sends or subscribes anew. Register ``SensorThingsTypes/all``
/// with the manager's registry so received objects decode straight into their types.
public final class SensorObserverController: Controller {
    /// The communication manager it observes and requests with.
    public let communicationManager: CommunicationManager

    /// Creates the controller.
    /// - Parameter communicationManager: the agent's communication manager.
    public init(communicationManager: CommunicationManager) {
        self.communicationManager = communicationManager
    }

    /// The observations of a sensor published on a channel (by
    /// ``SensorSourceController/publishChanneledObservation(sensorId:resultQuality:validTime:parameters:featureOfInterestId:)``):
    /// Channel events with one ``Observation`` whose `parentObjectId` is the sensor.
    /// - Parameters:
    ///   - sensorId: the sensor's objectId.
    ///   - channelId: the channel; the sensor's objectId by default, as Coaty JS uses.
    /// - Returns: the observations.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an invalid channel id.
    public func observeChanneledObservations(
        sensorId: CoatyUUID,
        channelId: String? = nil
    ) throws(CommunicationError) -> SensorThingsEvents<Observation> {
        let events = try communicationManager.observeChannel(channelId ?? sensorId.uuidString)
        return SensorThingsEvents(events) { event in
            guard event.data.isSingleObject, let object = event.data.objects.first,
                object.objectType == Observation.objectType, object.parentObjectId == sensorId
            else { return nil }
            return object.as(Observation.self)
        }
    }

    /// The observations of a sensor that are advertised.
    /// - Parameter sensorId: the sensor's objectId.
    /// - Returns: the observations.
    /// - Throws: ``CommunicationError`` for an invalid namespace.
    public func observeAdvertisedObservations(sensorId: CoatyUUID) throws(CommunicationError) -> SensorThingsEvents<
        Observation
    > {
        SensorThingsEvents(try communicationManager.observeAdvertise(Observation.self)) { event in
            event.object.parentObjectId == sensorId ? event.object : nil
        }
    }

    /// The sensors that are advertised.
    /// - Returns: the sensors.
    /// - Throws: ``CommunicationError`` for an invalid namespace.
    public func observeAdvertisedSensors() throws(CommunicationError) -> SensorThingsEvents<Sensor> {
        SensorThingsEvents(try communicationManager.observeAdvertise(Sensor.self)) { $0.object }
    }

    /// Discovers the sensors of the network: a Discover of the object type
    /// `coaty.sensorThings.Sensor`, one sensor per Resolve.
    /// - Returns: the lazy responses.
    public func discoverSensors() -> SensorThingsResponses<Sensor> {
        communicationManager.discoverObjects(Sensor.self)
    }

    /// Queries the sensors of a thing: a Query of the object type `coaty.sensorThings.Sensor`
    /// with the condition `parentObjectId` equals `thingId`; one array per Retrieve.
    /// - Parameter thingId: the thing's objectId.
    /// - Returns: the lazy responses.
    public func querySensorsOfThing(_ thingId: CoatyUUID) -> SensorThingsResponses<[Sensor]> {
        communicationManager.queryObjects(Sensor.self, where: "parentObjectId", equals: thingId)
    }
}

/// Observes things; Coaty JS's `ThingObserverController`.
///
/// ```swift
/// let things = try await ThingObserverController(communicationManager: manager)
///     .discoverThings().responses(timeout: .seconds(2)).collect()
/// ```
public final class ThingObserverController: Controller {
    /// The communication manager it observes and requests with.
    public let communicationManager: CommunicationManager

    /// Creates the controller.
    /// - Parameter communicationManager: the agent's communication manager.
    public init(communicationManager: CommunicationManager) {
        self.communicationManager = communicationManager
    }

    /// Discovers the things of the network: a Discover of the object type
    /// `coaty.sensorThings.Thing`, one thing per Resolve.
    /// - Returns: the lazy responses.
    public func discoverThings() -> SensorThingsResponses<Thing> {
        communicationManager.discoverObjects(Thing.self)
    }

    /// The things that are advertised.
    /// - Returns: the things.
    /// - Throws: ``CommunicationError`` for an invalid namespace.
    public func observeAdvertisedThings() throws(CommunicationError) -> SensorThingsEvents<Thing> {
        SensorThingsEvents(try communicationManager.observeAdvertise(Thing.self)) { $0.object }
    }

    /// Queries the things at a location: a Query of the object type `coaty.sensorThings.Thing`
    /// with the condition `locationId` equals `locationId`; one array per Retrieve.
    /// - Parameter locationId: the Location's objectId.
    /// - Returns: the lazy responses.
    public func queryThingsAtLocation(_ locationId: CoatyUUID) -> SensorThingsResponses<[Thing]> {
        communicationManager.queryObjects(Thing.self, where: "locationId", equals: locationId)
    }
}

extension CommunicationManager {
    /// A Discover of the object type of `T`, one value per Resolve.
    fileprivate func discoverObjects<T: CoatyObject>(_ type: T.Type) -> SensorThingsResponses<T> {
        SensorThingsResponses(publishDiscover(.objectTypes([T.objectType]))) { $0.data.object?.as(T.self) }
    }

    /// A Query of the object type of `T` whose `property` equals `id`, one array per Retrieve.
    fileprivate func queryObjects<T: CoatyObject>(
        _ type: T.Type,
        where property: ObjectFilterProperty,
        equals id: CoatyUUID
    ) -> SensorThingsResponses<[T]> {
        let query = QueryEventData(
            objectTypes: [T.objectType],
            objectFilter: .where(property, .equals(.string(id.uuidString)))
        )
        return SensorThingsResponses(publishQuery(query)) { retrieve in
            retrieve.data.objects.compactMap { $0.as(T.self) }
        }
    }
}
