/// CoatyKit: the umbrella module. Import it to get the object model, the communication
/// layer and the MQTT transport in one line.
@_exported public import CoatyCore
@_exported public import CoatyMQTT
@_exported public import CoatyMQTTTransport
