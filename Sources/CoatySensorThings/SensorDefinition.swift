public import CoatyCore

/// Makes the ``SensorIo`` of a ``SensorDefinition`` from the definition's `parameters` (`nil`
/// when absent); Coaty JS's `new definition.io(definition.parameters)`.
public typealias SensorIoFactory = @Sendable (_ parameters: JSONValue?) throws -> any SensorIo

/// The ``SensorIo`` kinds a configuration may name in a ``SensorDefinition``'s `io`, each with the
/// factory that makes one from the definition's `parameters`.
///
/// Coaty JS names the IO class itself in a sensor definition; Swift cannot make an instance of a
/// class from its name, so a configuration names a registered factory instead. ``standard`` has
/// Coaty JS's `MockSensorIo` and CoatyKit's `LinuxTemperatureSensorIo`; register your own:
///
/// ```swift
/// var ios = SensorIoRegistry.standard
/// ios.register("BatteryIo") { parameters in BatteryIo(cell: parameters?["cell"]?.intValue ?? 0) }
/// var options = SensorSourceController.Options()
/// options.sensorIos = ios
/// ```
///
/// The built-in factories read these `parameters` (other members are ignored, as Coaty JS's
/// `MockSensorIo` ignores its parameters):
///
/// | name | parameters |
/// |---|---|
/// | `MockSensorIo` | none: reads give 0 until written (Coaty JS); `{"value": V}`: reads give V; `{"values": [A, B, …]}`: reads give the values in turn |
/// | `LinuxTemperatureSensorIo` | none: the first input found; `{"path": "/sys/…/temp1_input"}`: that file; `{"label": "cpu"}`: the first input whose label contains it (any case); `{"root": "/"}`: the directory holding `sys` |
public struct SensorIoRegistry: Sendable {
    private var factories: [String: SensorIoFactory]

    /// An empty registry.
    public init() {
        factories = [:]
    }

    /// `MockSensorIo` and `LinuxTemperatureSensorIo` (see the type's description).
    public static let standard: SensorIoRegistry = {
        var registry = SensorIoRegistry()
        registry.register("MockSensorIo", factory: MockSensorIo.init(parameters:))
        registry.register("LinuxTemperatureSensorIo", factory: LinuxTemperatureSensorIo.init(parameters:))
        return registry
    }()

    /// Registers a factory under a name, replacing one of the same name.
    /// - Parameters:
    ///   - name: the name a definition's `io` gives, e.g. `CPULoadSensorIo`.
    ///   - factory: makes the IO from the definition's `parameters`; its error is reported
    ///     naming the definition's `parameters` field.
    public mutating func register(_ name: String, factory: @escaping SensorIoFactory) {
        factories[name] = factory
    }

    /// The registered names, sorted.
    public var names: [String] { factories.keys.sorted() }

    /// The factory registered under a name.
    /// - Parameter name: the name.
    /// - Returns: the factory, or `nil`.
    public func factory(named name: String) -> SensorIoFactory? { factories[name] }
}

/// A sensor as a configuration defines it: Coaty JS's `SensorDefinition` in the `sensors` option
/// of a ``SensorSourceController``.
///
/// ```json
/// "controllers": {
///   "SensorSourceController": {
///     "sensors": [{
///       "sensor": { "objectId": "…", "coreType": "CoatyObject", "objectType": "coaty.sensorThings.Sensor", "name": "CPU", … },
///       "io": "MockSensorIo",
///       "parameters": { "values": [41.5, 42] },
///       "observationPublicationType": "channel",
///       "samplingInterval": 1000
///     }]
///   }
/// }
/// ```
///
/// `io` names a factory of the controller's ``SensorIoRegistry`` (Coaty JS: the IO class);
/// `observationPublicationType` is `none`, `advertise` or `channel` (absent: `none`), and for the
/// last two `samplingInterval` is a positive number of milliseconds, as Coaty JS requires.
public struct SensorDefinition: Sendable {
    /// The sensor (`sensor`).
    public var sensor: Sensor
    /// The name of its IO's factory in a ``SensorIoRegistry`` (`io`).
    public var io: String
    /// The IO's hardware-specific parameters (`parameters`).
    public var parameters: JSONValue?
    /// How its observations are published (`observationPublicationType` and `samplingInterval`).
    public var publication: ObservationPublication

    /// Creates a definition.
    /// - Parameters:
    ///   - sensor: the sensor.
    ///   - io: the name of its IO's factory.
    ///   - parameters: the IO's parameters.
    ///   - publication: how its observations are published.
    public init(sensor: Sensor, io: String, parameters: JSONValue? = nil, publication: ObservationPublication = .none) {
        self.sensor = sensor
        self.io = io
        self.parameters = parameters
        self.publication = publication
    }

    /// Reads a definition in Coaty JS's layout.
    /// - Parameters:
    ///   - json: the definition.
    ///   - path: its field path for errors, e.g. `controllers.SensorSourceController.sensors[0]`.
    /// - Throws: ``AgentConfigurationError`` naming the bad member: not an object, a missing or
    ///   invalid `sensor` (it must decode as a ``Sensor`` of object type
    ///   `coaty.sensorThings.Sensor`), a missing `io`, an unknown `observationPublicationType`, or
    ///   a missing or non-positive `samplingInterval`.
    public init(json: JSONValue, at path: String) throws(AgentConfigurationError) {
        guard let object = json.objectValue else {
            throw AgentConfigurationError(
                field: path,
                reason: "must be an object with sensor and io (a SensorDefinition)"
            )
        }
        guard let sensorJSON = object["sensor"], !sensorJSON.isNull else {
            throw AgentConfigurationError(field: path + ".sensor", reason: "is missing; give the Sensor object")
        }
        let sensor: Sensor
        do {
            let decoded = try CoatyObjectRegistry(SensorThingsTypes.all).decode(sensorJSON)
            guard let value = decoded.as(Sensor.self) else {
                throw AgentConfigurationError(
                    field: path + ".sensor.objectType",
                    reason: "is \(decoded.objectType), not \(Sensor.objectType)"
                )
            }
            sensor = value
        } catch let error as AgentConfigurationError {
            throw error
        } catch {
            throw AgentConfigurationError(field: path + ".sensor", reason: "is not a valid Sensor: \(error)")
        }
        guard let io = object["io"]?.stringValue, !io.isEmpty else {
            throw AgentConfigurationError(
                field: path + ".io",
                reason: "is missing or not a string; name a SensorIo, e.g. MockSensorIo"
            )
        }
        let publication: ObservationPublication
        let type = object["observationPublicationType"].flatMap { $0.isNull ? nil : $0 }
        switch type.map(\.stringValue) ?? "none" {
        case "none"?:
            publication = .none
        case let kind? where kind == "advertise" || kind == "channel":
            guard let milliseconds = object["samplingInterval"]?.doubleValue, milliseconds > 0,
                milliseconds.isFinite
            else {
                throw AgentConfigurationError(
                    field: path + ".samplingInterval",
                    reason: "must be a positive number of milliseconds when observationPublicationType is \(kind)"
                )
            }
            let interval = Duration.nanoseconds(Int64((milliseconds * 1_000_000).rounded()))
            publication = kind == "advertise" ? .advertise(every: interval) : .channel(every: interval)
        default:
            throw AgentConfigurationError(
                field: path + ".observationPublicationType",
                reason: "must be \"none\", \"advertise\" or \"channel\", not \(type?.description ?? "absent")"
            )
        }
        let parameters = object["parameters"].flatMap { $0.isNull ? nil : $0 }
        self.init(sensor: sensor, io: io, parameters: parameters, publication: publication)
    }

    /// Reads the `sensors` member of a controller's options: an array of definitions.
    /// - Parameters:
    ///   - options: the controller's options.
    ///   - path: their field path for errors, e.g. `controllers.SensorSourceController`.
    /// - Returns: the definitions; none when `sensors` is absent or `null`.
    /// - Throws: ``AgentConfigurationError`` naming the bad member.
    public static func definitions(in options: JSONObject, at path: String) throws(AgentConfigurationError)
        -> [SensorDefinition]
    {
        let field = path.isEmpty ? "sensors" : path + ".sensors"
        guard let sensors = options["sensors"], !sensors.isNull else { return [] }
        guard let array = sensors.arrayValue else {
            throw AgentConfigurationError(field: field, reason: "must be an array of sensor definitions")
        }
        var definitions: [SensorDefinition] = []
        for (index, json) in array.enumerated() {
            definitions.append(try SensorDefinition(json: json, at: "\(field)[\(index)]"))
        }
        return definitions
    }

    /// Makes the definition's IO with a registry's factory.
    /// - Parameters:
    ///   - registry: the factories.
    ///   - path: the definition's field path for errors.
    /// - Returns: the IO.
    /// - Throws: ``AgentConfigurationError`` naming `io` when no factory has that name (listing the
    ///   registered ones), or `parameters` when the factory fails.
    public func makeIo(with registry: SensorIoRegistry, at path: String = "") throws(AgentConfigurationError)
        -> any SensorIo
    {
        let prefix = path.isEmpty ? "" : path + "."
        guard let factory = registry.factory(named: io) else {
            throw AgentConfigurationError(
                field: prefix + "io",
                reason: "'\(io)' is not a registered SensorIo; use one of \(registry.names.joined(separator: ", ")) "
                    + "or register it in SensorSourceController.Options.sensorIos"
            )
        }
        do {
            return try factory(parameters)
        } catch {
            throw AgentConfigurationError(field: prefix + "parameters", reason: "\(io) cannot be made: \(error)")
        }
    }
}

extension MockSensorIo {
    /// The IO of a definition naming `MockSensorIo` (see ``SensorIoRegistry``).
    /// - Parameter parameters: `{"value": V}`, `{"values": [A, B, …]}`, or anything else for 0.
    public convenience init(parameters: JSONValue?) {
        if let values = parameters?["values"]?.arrayValue {
            self.init(values: values)
        } else if let value = parameters?["value"] {
            self.init(value: value)
        } else {
            self.init()
        }
    }
}

extension LinuxTemperatureSensorIo {
    /// The IO of a definition naming `LinuxTemperatureSensorIo` (see ``SensorIoRegistry``).
    /// - Parameter parameters: `path` (a file of millidegrees), or `root` and `label` to search.
    /// - Throws: ``SensorIoError/noTemperatureSensor(searched:)`` when nothing matches.
    public init(parameters: JSONValue?) throws(SensorIoError) {
        if let path = parameters?["path"]?.stringValue {
            let kind: TemperatureInput.Kind = path.contains("/thermal/") ? .thermalZone : .hwmon
            self.init(input: TemperatureInput(path: path, kind: kind, label: path))
            return
        }
        let root = parameters?["root"]?.stringValue ?? "/"
        let label = parameters?["label"]?.stringValue?.lowercased()
        try self.init(root: root) { input in label.map { input.label.lowercased().contains($0) } ?? true }
    }
}
