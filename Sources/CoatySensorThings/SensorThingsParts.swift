public import CoatyCore

// The nested structures and string-valued kinds of the Sensor Things objects (Coaty JS
// `sensor-things/objects.ts`, and `TimeInterval` of `util/date.ts`). Nested structures keep
// unknown members in `custom`, like the core types' parts; the string-valued kinds are coded as
// their raw string by the standard library's `RawRepresentable` Codable conformance.

/// The unit of measurement of a ``Sensor``'s observations, after the Unified Code for Units of
/// Measure (UCUM); Coaty JS's `UnitOfMeasurement`.
///
/// ```swift
/// let celsius = UnitOfMeasurement(name: "Degree Celsius", symbol: "degC",
///     definition: "http://www.qudt.org/qudt/owl/1.0.0/unit/Instances.html#DegreeCelsius")
/// ```
///
/// Coaty JS declares all three members as required strings; a unitless observation type (such
/// as truth) may leave them out, so they are optional here and absent members are not sent.
public struct UnitOfMeasurement: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// The full name, e.g. `Degree Celsius`.
    public var name: String?
    /// The unit symbol, e.g. `degC`.
    public var symbol: String?
    /// A URI defining the unit.
    public var definition: String?
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case name, symbol, definition
    }

    /// Creates a unit of measurement.
    /// - Parameters:
    ///   - name: the full name.
    ///   - symbol: the unit symbol.
    ///   - definition: a URI defining the unit.
    public init(name: String?, symbol: String?, definition: String?) {
        self.name = name
        self.symbol = symbol
        self.definition = definition
    }

    /// Degree Celsius (`degC`), the unit of ``LinuxTemperatureSensorIo`` readings.
    public static let degreeCelsius = UnitOfMeasurement(
        name: "Degree Celsius",
        symbol: "degC",
        definition: "http://www.qudt.org/qudt/owl/1.0.0/unit/Instances.html#DegreeCelsius"
    )
}

/// The phenomenon a ``Sensor``'s observations measure; Coaty JS's `ObservedProperty`.
public struct ObservedProperty: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// A label, commonly a descriptive name (Coaty JS requires it to be non-empty).
    public var name: String
    /// The URI of the property's definition.
    public var definition: String
    /// A description.
    public var description: String
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case name, definition, description
    }

    /// Creates an observed property.
    /// - Parameters:
    ///   - name: a descriptive name.
    ///   - definition: the URI of its definition.
    ///   - description: a description.
    public init(name: String, definition: String, description: String) {
        self.name = name
        self.definition = definition
        self.description = description
    }
}

/// A time interval in milliseconds since 1970 (UTC); Coaty JS's `TimeInterval` (`util/date.ts`).
///
/// Valid forms (see ``isValid``): start and end; start and duration; duration and end; duration
/// only. Every number is non-negative.
public struct CoatyTimeInterval: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// The start, in milliseconds since 1970.
    public var start: Double?
    /// The end, in milliseconds since 1970.
    public var end: Double?
    /// The duration, in milliseconds.
    public var duration: Double?
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case start, end, duration
    }

    /// Creates an interval; give one of the valid combinations.
    /// - Parameters:
    ///   - start: the start, in milliseconds since 1970.
    ///   - end: the end, in milliseconds since 1970.
    ///   - duration: the duration, in milliseconds.
    public init(start: Double? = nil, end: Double? = nil, duration: Double? = nil) {
        self.start = start
        self.end = end
        self.duration = duration
    }

    /// Whether this is one of the valid forms, as Coaty JS's `isValidTimeInterval` decides.
    public var isValid: Bool {
        func valid(_ value: Double?) -> Bool { value.map { $0 >= 0 } ?? false }
        guard let duration else { return valid(start) && valid(end) }
        guard duration >= 0 else { return false }
        if start == nil { return end == nil || valid(end) }
        return end == nil && valid(start)
    }
}

/// A GeoJSON polygon (RFC 7946), the type of ``Sensor/observedArea``.
public struct GeoJSONPolygon: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// The GeoJSON type, `Polygon`.
    public var type: String
    /// The linear rings: the exterior ring first, then holes; each position is
    /// `[longitude, latitude(, altitude)]`.
    public var coordinates: [[[Double]]]
    /// A bounding box, if given.
    public var bbox: [Double]?
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case type, coordinates, bbox
    }

    /// Creates a polygon.
    /// - Parameters:
    ///   - coordinates: the linear rings.
    ///   - bbox: a bounding box.
    public init(coordinates: [[[Double]]], bbox: [Double]? = nil) {
        self.type = "Polygon"
        self.coordinates = coordinates
        self.bbox = bbox
    }
}

/// A kind that travels as a string and accepts any string (Coaty JS types it as a union of
/// well-known strings and `string`): ``EncodingType`` and ``ObservationType``. Coded as the
/// raw string; a string literal makes one.
public protocol StringValuedKind: RawRepresentable<String>, Codable, Sendable, Hashable, ExpressibleByStringLiteral {
    /// Wraps a string.
    /// - Parameter rawValue: the string.
    init(rawValue: String)
}

extension StringValuedKind {
    /// Wraps a string literal.
    /// - Parameter value: the string.
    public init(stringLiteral value: String) {
        self.init(rawValue: value)
    }
}

/// How a ``Sensor``'s or ``FeatureOfInterest``'s `metadata` is encoded: a string on the wire,
/// any string allowed; Coaty JS's `EncodingType` and `SensorEncodingType`.
public struct EncodingType: StringValuedKind {
    /// The string sent on the wire.
    public var rawValue: String

    /// Wraps a string.
    /// - Parameter rawValue: the encoding type.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// An undefined encoding type: the empty string (`SensorEncodingTypes.UNDEFINED`).
    public static let undefined = EncodingType(rawValue: "")
    /// `application/pdf`: a PDF data sheet.
    public static let pdf = EncodingType(rawValue: "application/pdf")
    /// `http://www.opengis.net/doc/IS/SensorML/2.0`: a SensorML description.
    public static let sensorML = EncodingType(rawValue: "http://www.opengis.net/doc/IS/SensorML/2.0")
    /// `application/vnd.geo+json`: GeoJSON (for a ``FeatureOfInterest``).
    public static let geoJSON = EncodingType(rawValue: "application/vnd.geo+json")
}

/// The kind of a ``Sensor``'s observations, which decides the type of
/// ``Observation/result``: an OGC O&M URI on the wire; Coaty JS's `ObservationType`.
public struct ObservationType: StringValuedKind {
    /// The URI sent on the wire.
    public var rawValue: String

    /// Wraps a URI.
    /// - Parameter rawValue: the observation type.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    private static let prefix = "http://www.opengis.net/def/observationType/OGC-OM/2.0/"
    /// Results are URLs (`OM_Category_Observation`).
    public static let category = ObservationType(rawValue: prefix + "OM_Category_Observation")
    /// Results are integers (`OM_CountObservation`).
    public static let count = ObservationType(rawValue: prefix + "OM_CountObservation")
    /// Results are numbers (`OM_Measurement`).
    public static let measurement = ObservationType(rawValue: prefix + "OM_Measurement")
    /// Results are any JSON (`OM_Observation`).
    public static let any = ObservationType(rawValue: prefix + "OM_Observation")
    /// Results are booleans (`OM_TruthObservation`).
    public static let truth = ObservationType(rawValue: prefix + "OM_TruthObservation")
}
